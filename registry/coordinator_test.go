package registry

import (
	"errors"
	"testing"
	"time"
)

// candidate campaigns as id on r and reports its terms on the returned
// channel (latest first: a full channel drops the older term).
func candidate(t *testing.T, r *Registry, id string) (*Candidate, <-chan Term) {
	t.Helper()
	terms := make(chan Term, 16)
	c, err := r.Campaign(CandidateConfig{NodeID: id, TTL: 2 * time.Second, OnChange: func(tm Term) {
		select {
		case terms <- tm:
		default:
			t.Errorf("candidate %s: term channel full", id)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, terms
}

// leaderOf waits until exactly one of cs leads and returns its index.
func leaderOf(t *testing.T, cs []*Candidate) int {
	t.Helper()
	leader := -1
	eventually(t, 15*time.Second, "one leader", func() bool {
		leader = -1
		for i, c := range cs {
			if c == nil || !c.Term().Leading() {
				continue
			}
			if leader >= 0 {
				t.Fatalf("candidates %d and %d both lead", leader, i)
			}
			leader = i
		}
		return leader >= 0
	})
	return leader
}

func TestElectionOneLeaderAndTakeover(t *testing.T) {
	ids := []string{"node-a", "node-b", "node-c"}
	var cs []*Candidate
	regs := make([]*Registry, len(ids))
	for i, id := range ids {
		regs[i] = openShared(t)
		c, _ := candidate(t, regs[i], id)
		cs = append(cs, c)
	}
	first := leaderOf(t, cs)
	term := cs[first].Term()
	id, epoch, err := regs[0].Coordinator(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if id != ids[first] || epoch != term.Epoch {
		t.Fatalf("Coordinator = %s epoch %d, want %s epoch %d", id, epoch, ids[first], term.Epoch)
	}

	watch := regs[2].WatchCutoffs(ctxFor(t, 30*time.Second))
	pub := Cutoffs{Round: 1, Coordinator: ids[first], Tiers: []TierCutoff{{Kind: "host", Worth: 2.5, Nodes: 3}}}
	if err := regs[first].PublishCutoffs(ctxFor(t, 5*time.Second), term, pub); err != nil {
		t.Fatal(err)
	}
	got := recvCutoffs(t, watch, func(c Cutoffs) bool { return c.Epoch == term.Epoch })
	if got.Round != 1 || len(got.Tiers) != 1 || got.Tiers[0].Worth != 2.5 {
		t.Fatalf("watched %+v", got)
	}

	// The leader resigns: another takes over with a larger epoch, and the
	// old term can no longer publish.
	cs[first].Close()
	if cs[first].Term().Leading() {
		t.Fatal("closed candidate still leads")
	}
	cs[first] = nil
	second := leaderOf(t, cs)
	term2 := cs[second].Term()
	if term2.Epoch <= term.Epoch {
		t.Fatalf("new epoch %d not above %d", term2.Epoch, term.Epoch)
	}
	err = regs[first].PublishCutoffs(ctxFor(t, 5*time.Second), term, Cutoffs{Round: 99})
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader publishing: %v, want ErrNotLeader", err)
	}
	if err := regs[second].PublishCutoffs(ctxFor(t, 5*time.Second), term2, Cutoffs{Round: 1}); err != nil {
		t.Fatal(err)
	}
	got = recvCutoffs(t, watch, func(c Cutoffs) bool { return c.Epoch == term2.Epoch })
	if got.Round != 1 {
		t.Fatalf("watched %+v", got)
	}
	cur, err := regs[0].CurrentCutoffs(ctxFor(t, 5*time.Second))
	if err != nil || cur.Epoch != term2.Epoch {
		t.Fatalf("CurrentCutoffs = %+v, %v; want epoch %d", cur, err, term2.Epoch)
	}
}

// TestDeposedLeaderCannotPublish cuts the leader off etcd until its session
// expires and another candidate leads; the old term's publication, once
// the leader reaches etcd again, is refused.
func TestDeposedLeaderCannotPublish(t *testing.T) {
	p := newProxy(t, sharedEtcd.Endpoints()[0])
	ra := openShared(t, func(c *Config) { c.Endpoints = []string{p.endpoint()}; c.RequestTimeout = time.Second })
	ca, termsA := candidate(t, ra, "node-a")
	var term Term
	select {
	case term = <-termsA:
	case <-time.After(15 * time.Second):
		t.Fatal("node-a not elected alone")
	}
	rb := openShared(t)
	cb, _ := candidate(t, rb, "node-b")

	p.cut()
	eventually(t, 20*time.Second, "node-b takes over", func() bool { return cb.Term().Leading() })
	if cb.Term().Epoch <= term.Epoch {
		t.Fatalf("epoch %d not above %d", cb.Term().Epoch, term.Epoch)
	}
	p.heal()
	// node-a's client reconnects through the healed proxy at its own pace:
	// until it does, a publication fails as unavailable (its request
	// timeout is 1 s), which is no answer either way.
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if err = ra.PublishCutoffs(ctxFor(t, 10*time.Second), term, Cutoffs{Round: 7}); !errors.Is(err, ErrUnavailable) {
			break
		}
	}
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader publishing: %v, want ErrNotLeader", err)
	}
	eventually(t, 10*time.Second, "node-a steps down", func() bool { return !ca.Term().Leading() })
	if _, err := rb.CurrentCutoffs(ctxFor(t, 5*time.Second)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cutoffs after refused publication: %v, want ErrNotFound", err)
	}
}

func TestCoordinatorNone(t *testing.T) {
	r := openShared(t)
	if _, _, err := r.Coordinator(ctxFor(t, 5*time.Second)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Coordinator with no candidate: %v, want ErrNotFound", err)
	}
	if err := r.PublishCutoffs(ctxFor(t, 5*time.Second), Term{}, Cutoffs{}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("publishing without a term: %v, want ErrNotLeader", err)
	}
}

func recvCutoffs(t *testing.T, ch <-chan Cutoffs, want func(Cutoffs) bool) Cutoffs {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("cutoffs watch closed")
			}
			if want(c) {
				return c
			}
		case <-timeout:
			t.Fatal("cutoffs not delivered within 10s")
		}
	}
}

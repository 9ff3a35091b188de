package coord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// TestFewCandidates: of five nodes with Candidates 2, only the first two
// by NodeID campaign once their views hold all five (each candidate keeps
// an etcd session alive: with every node campaigning, three quarters of a
// thousand nodes' etcd requests were election sessions), besides a leader
// elected before the views filled; when the leader goes, a candidate
// takes over and the cutoffs reach every node again.
func TestFewCandidates(t *testing.T) {
	e := startEtcd(t)
	two := func(c *Config) { c.Candidates = 2 }
	var nodes []*testNode
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].members.GossipAddress()}
		}
		nodes = append(nodes, startNodeLogged(t, id, e.Endpoints(), seeds, 1<<20, 10*(i+1), 1<<20, testRound, testLogger(t), two))
	}
	// campaigning returns the nodes campaigning, and whether they are the
	// first two live ones by NodeID and at most a leader besides.
	campaigning := func() (ids []string, ok bool) {
		ok, first := true, 0
		for _, n := range nodes { // in NodeID order
			if n.closed.Load() {
				continue
			}
			first++
			n.coord.candMu.Lock()
			on := n.coord.cand != nil
			n.coord.candMu.Unlock()
			if on {
				ids = append(ids, n.id)
				ok = ok && (first <= 2 || n.coord.State().Leading)
			}
		}
		return ids, ok && len(ids) <= 3
	}
	var ids []string
	poll.Until(t, 15*time.Second, 20*time.Millisecond, "only a, b and a leader campaigning", func() bool {
		// (at the start each node sees itself among the first two)
		var ok bool
		ids, ok = campaigning()
		return ok
	})
	leader := leaderOf(t, nodes)
	epoch := allCoordinated(t, nodes, 0)
	t.Logf("campaigning: %s; leader %s", strings.Join(ids, ", "), leader.id)

	leader.close()
	if next := leaderOf(t, nodes); next == leader {
		t.Fatal("closed node still leads")
	}
	allCoordinated(t, nodes, epoch)
	poll.Until(t, 15*time.Second, 20*time.Millisecond, fmt.Sprintf("the first two campaigning after %s closed", leader.id), func() bool {
		ids, ok := campaigning()
		return ok && len(ids) >= 2
	})
}

package coord

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testlog"
	"github.com/stratakv/strata/registry"
)

// TestHealthyStartLogsNoWarning: nodes that start together and find their
// coordinator within the start grace log no warning, only their local
// cutoffs at info until the coordinator's arrive, and keep applying them.
func TestHealthyStartLogsNoWarning(t *testing.T) {
	e := startEtcd(t)
	var logs testlog.Buffer
	var nodes []*testNode
	for i, id := range []string{"a", "b", "c"} {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].members.GossipAddress()}
		}
		nodes = append(nodes, startNodeLogged(t, id, e.Endpoints(), seeds, 1<<20, 10*(i+1), 1<<20, testRound, logs.Logger()))
	}
	allCoordinated(t, nodes, 0)
	// Three more publications applied everywhere: past the rounds in which
	// the old loop warned, with every node coordinated all along.
	var sets []int
	for _, n := range nodes {
		_, _, _, k := n.store.cutoffs()
		sets = append(sets, k)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "three more rounds of cutoffs on every node", func() bool {
		for i, n := range nodes {
			if _, _, coordinated, k := n.store.cutoffs(); !coordinated || k < sets[i]+3 {
				return false
			}
		}
		return true
	})
	out := logs.String()
	if strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Errorf("a healthy start warned:\n%s", out)
	}
	if got := strings.Count(out, "applying the coordinator's cutoffs"); got != len(nodes) {
		t.Errorf("%d nodes said they apply the coordinator's cutoffs, want %d:\n%s", got, len(nodes), out)
	}
}

// TestStartWithoutCutoffsWarnsAfterGrace: a node whose coordinator never
// publishes (another candidate holds the election and publishes nothing)
// logs its local cutoffs at info, then warns once, past the start grace.
func TestStartWithoutCutoffsWarnsAfterGrace(t *testing.T) {
	e := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: e.Endpoints(), RequestTimeout: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	mute, err := reg.Campaign(registry.CandidateConfig{NodeID: "mute"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() }) // after the node's: it never leads
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the mute candidate leads", func() bool { return mute.Term().Leading() })

	var logs testlog.Buffer
	const round = 50 * time.Millisecond
	n := startNodeLogged(t, "a", e.Endpoints(), nil, 1<<20, 10, 1<<20, round, logs.Logger())
	grace := n.coord.startGrace()
	poll.Until(t, grace+10*time.Second, 20*time.Millisecond, "a warning", func() bool { return strings.Contains(logs.String(), "level=WARN") })
	out := logs.String()
	info := strings.Index(out, "using local cutoffs until the coordinator's arrive")
	warn := regexp.MustCompile(`level=WARN msg="no coordinator cutoffs since the start[^"]*" .*waited=(\S+)`).FindStringSubmatchIndex(out)
	if info < 0 || warn == nil || info > warn[0] || strings.Count(out, "level=WARN") != 1 {
		t.Fatalf("want the local cutoffs at info, then one warning of no cutoffs since the start:\n%s", out)
	}
	if waited, err := time.ParseDuration(out[warn[2]:warn[3]]); err != nil || waited < grace {
		t.Errorf("warned after %s (%v), within the start grace of %s", out[warn[2]:warn[3]], err, grace)
	}
	if st := n.coord.State(); st.Coordinated {
		t.Errorf("state %+v, want local cutoffs", st)
	}
}

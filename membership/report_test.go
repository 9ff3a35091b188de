package membership

import (
	"bytes"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestCollect: a member asking for reports gets every other member's by
// a direct packet, and its own; a member whose report is too large answers
// with none; a member not known is not asked; gossip metadata carries none
// of it.
func TestCollect(t *testing.T) {
	reports := map[string][]byte{
		"a": []byte("report of a"),
		"b": bytes.Repeat([]byte{'b'}, MaxReportSize),
		"c": bytes.Repeat([]byte{'c'}, MaxReportSize+1), // too large
	}
	var nodes []*testNode
	for _, id := range []string{"a", "b", "c"} {
		var seeds []string
		if len(nodes) > 0 {
			seeds = []string{nodes[0].GossipAddress()}
		}
		nodes = append(nodes, startNode(t, id, seeds, func(cfg *Config) {
			cfg.Report = func() []byte { return reports[id] }
		}))
	}
	for _, n := range nodes {
		waitFor(t, n, 15*time.Second, "all alive", func(ms []Member) bool { return len(nodeIDs(ms, Alive)) == 3 })
	}
	want := map[string][]byte{"a": reports["a"], "b": reports["b"], "c": nil}
	// A packet may be lost, as UDP's may: ask again, a bounded number of times.
	var got map[string][]byte
	for try := 0; try < 10 && len(got) < 3; try++ {
		var err error
		got, err = nodes[0].Collect(ctxFor(t, 2*time.Second), []string{"a", "b", "c", "stranger"})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("Collect: got %d reports %v, want %v", len(got), slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for _, m := range nodes[1].Members() {
		if len(m.Meta.Summary) > 0 || len(m.Meta.Tiers) != 2 {
			t.Errorf("b sees %s's metadata as %+v: want its tiers and no report", m.NodeID, m.Meta)
		}
	}

	_ = nodes[2].Close()
	if _, err := nodes[2].Collect(ctxFor(t, time.Second), []string{"a"}); err == nil {
		t.Error("Collect after Close succeeded")
	}
}

package coord

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/membership"
)

// BenchmarkRound3Nodes is one coordinator round of a real three-node
// cluster on loopback: read the gossip view (real memberlist), collect
// the three nodes' summaries (reports, a packet each way), decode and
// merge them, and publish the cutoffs to a real (embedded, fsyncing) etcd with the leader-guarded transaction. The loops
// run with an hour between rounds, so only the benchmark publishes.
func BenchmarkRound3Nodes(b *testing.B) {
	e := startEtcd(b)
	var nodes []*testNode
	for i, id := range []string{"a", "b", "c"} {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].members.GossipAddress()}
		}
		nodes = append(nodes, startNodeRound(b, id, e.Endpoints(), seeds, 1<<20, 10*(i+1), 1<<20, time.Hour))
	}
	lead := leaderOf(b, nodes)
	poll.Until(b, 15*time.Second, 20*time.Millisecond, "every member reporting to the coordinator", func() bool {
		got, err := lead.members.Collect(b.Context(), []string{"a", "b", "c"})
		return err == nil && len(got) == 3
	})
	var ld leader
	b.ReportAllocs()
	for b.Loop() {
		if err := ld.publish(lead.coord); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompute is the coordinator's merge alone (no gossip, no etcd)
// over members carrying three tiers' summaries each: decode and
// ComputeCutoffs per tier kind.
func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			members := make([]membership.Member, n)
			for i := range members {
				sums := make([]eviction.Summary, 3)
				for t := range sums {
					sums[t].Turnover = r.Float64()
					for k := range sums[t].Bytes {
						sums[t].Bytes[k] = r.Int64N(1 << 30)
					}
				}
				enc, _, err := EncodeSummaries(sums, 1000)
				if err != nil {
					b.Fatal(err)
				}
				members[i] = membership.Member{NodeID: fmt.Sprintf("node-%04d", i), Meta: membership.Meta{
					Tiers: []membership.TierMeta{{Kind: "gpu", Capacity: 80 << 30}, {Kind: "host", Capacity: 1 << 40},
						{Kind: "ssd", Capacity: 1 << 42}}, Summary: enc}}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compute(members, DefaultHeadroom); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

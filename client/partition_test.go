package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// memberStates asks a node for its view: node id → state.
func memberStates(t *testing.T, addr string) map[string]pb.MemberState {
	t.Helper()
	resp, err := pb.NewClusterClient(rawConn(t, addr)).Members(ctxT(t), &pb.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]pb.MemberState{}
	for _, m := range resp.GetMembers() {
		out[m.GetNodeId()] = m.GetState()
	}
	return out
}

// TestPartitionHeals cuts one node's gossip off from the other two (both
// directions, through the membership seam, loopback only): the two keep
// serving with the third counted out, and after healing all three see each
// other alive again.
func TestPartitionHeals(t *testing.T) {
	cuts := []*membership.Partition{{}, {}, {}}
	var nodes []*node.Node
	var etcd []string
	for i := range 3 {
		cfg := node.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), EmbeddedEtcdURL: "http://127.0.0.1:0",
			HostBytes: 32 << 20, Partition: cuts[i], EtcdEndpoints: etcd}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := node.Start(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
		etcd = nodes[0].EtcdEndpoints()
	}
	alive := func(addr string, want int) func() bool {
		return func() bool {
			n := 0
			for _, s := range memberStates(t, addr) {
				if s == pb.MemberState_MEMBER_STATE_ALIVE {
					n++
				}
			}
			return n == want
		}
	}
	poll.Until(t, 20*time.Second, 100*time.Millisecond, "three alive", alive(nodes[0].Addr(), 3))

	ctx := ctxT(t)
	c := dialWith(t, nodes[0].Addr(), client.Options{NodeTimeout: time.Second})
	ns := open(t, c)

	// Isolate node 2 from nodes 0 and 1, both ways.
	iso := nodes[2]
	cuts[2].Block(nodes[0].GossipAddress(), nodes[1].GossipAddress())
	cuts[0].Block(iso.GossipAddress())
	cuts[1].Block(iso.GossipAddress())
	poll.Until(t, 15*time.Second, 100*time.Millisecond, "majority sees the isolated node gone", func() bool {
		return memberStates(t, nodes[0].Addr())[iso.ID()] != pb.MemberState_MEMBER_STATE_ALIVE &&
			memberStates(t, nodes[1].Addr())[iso.ID()] != pb.MemberState_MEMBER_STATE_ALIVE
	})
	poll.Until(t, 10*time.Second, 100*time.Millisecond, "client view drops the isolated node", func() bool {
		for _, m := range c.Members() {
			if m.ID == iso.ID() && m.State == client.MemberAlive {
				return false
			}
		}
		return true
	})
	// The rest keep serving: a prompt written now lands on the two and reads back.
	keys := ns.PageKeys(tokens(16*60, 77))
	data := pagesFor(ns, keys)
	res, err := ns.Put(ctx, client.ChainPages(keys, data))
	mustStore(t, "put during the partition", res, err)
	lr, err := ns.Lookup(ctx, keys, false, 0)
	if err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("lookup during the partition: hit prefix %d of %d, %v", lr.HitPrefix, len(keys), err)
	}
	readsBack(ctxT(t), t, ns, keys, data) // a fresh deadline for the read-back

	// Heal: every node sees three alive again.
	for _, cut := range cuts {
		cut.Heal()
	}
	for _, n := range nodes {
		poll.Until(t, 20*time.Second, 100*time.Millisecond, "view converges after healing on "+n.ID(), alive(n.Addr(), 3))
	}
}

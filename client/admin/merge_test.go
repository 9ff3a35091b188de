package admin

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// k is a one-byte key, enough to order by.
func k(b byte) *pb.KeyInfo { return &pb.KeyInfo{Key: []byte{b}} }

func TestMergeKeys(t *testing.T) {
	x := nodeKeys{node: "x", keys: []*pb.KeyInfo{k(1), k(4), k(6)}}
	y := nodeKeys{node: "y", keys: []*pb.KeyInfo{k(2), k(4), k(5)}}
	yMore := y
	yMore.more = true
	for _, c := range []struct {
		name  string
		lists []nodeKeys
		limit int
		want  string // node:key rows
		next  []byte
	}{
		{"nothing", nil, 0, "", nil},
		{"one node", []nodeKeys{x}, 0, "x1 x4 x6", nil},
		{"merged", []nodeKeys{x, y}, 0, "x1 y2 x4 y4 y5 x6", nil},
		{"an empty node", []nodeKeys{{node: "z"}, y}, 0, "y2 y4 y5", nil},
		{"limit", []nodeKeys{x, y}, 2, "x1 y2", []byte{2}},
		{"limit at the end", []nodeKeys{x, y}, 6, "x1 y2 x4 y4 y5 x6", nil},
		{"copies of a key stay together", []nodeKeys{x, y}, 3, "x1 y2 x4 y4", []byte{4}},
		{"a node with more", []nodeKeys{x, yMore}, 0, "x1 y2 x4 y4 y5 x6", []byte{6}},
	} {
		rows, next := mergeKeys(c.lists, c.limit)
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s%d", r.Node, r.Info.GetKey()[0]))
		}
		if strings.Join(got, " ") != c.want || !bytes.Equal(next, c.next) {
			t.Errorf("%s: rows %q next %v, want %q next %v", c.name, got, next, c.want, c.next)
		}
	}
}

func TestSumNamespaces(t *testing.T) {
	id1, id2 := []byte{1}, []byte{2}
	d := &pb.Descriptor{Tenant: "acme"}
	host := func(pages uint64) []*pb.TierStats {
		return []*pb.TierStats{{Tier: pb.Tier_TIER_HOST, Pages: pages, UsedBytes: pages * 10}}
	}
	got := sumNamespaces([]NodeNamespace{
		{"a", &pb.NamespaceInfo{Id: id1, Descriptor_: d, PageBytes: 10, Pages: 3, Bytes: 30, CreatedUnixMs: 200,
			Lookups: 1, LookupKeys: 4, HitKeys: 3, LeasesActive: 1, Tiers: host(3)}},
		{"a", &pb.NamespaceInfo{Id: id2, PageBytes: 20}},
		{"b", &pb.NamespaceInfo{Id: id1, PageBytes: 10, Pages: 2, Bytes: 20, CreatedUnixMs: 100,
			Lookups: 1, LookupKeys: 1, HitKeys: 1,
			Tiers: append(host(1), &pb.TierStats{Tier: pb.Tier_TIER_GPU, Pages: 1, UsedBytes: 10})}},
		{"c", &pb.NamespaceInfo{Id: id1, PageBytes: 10}},
	})
	if len(got) != 2 || !bytes.Equal(got[0].Info.GetId(), id1) || !bytes.Equal(got[1].Info.GetId(), id2) {
		t.Fatalf("sums: %v", got)
	}
	n := got[0].Info
	if n.GetDescriptor_() != d || n.GetPageBytes() != 10 || n.GetPages() != 5 || n.GetBytes() != 50 ||
		n.GetCreatedUnixMs() != 100 || n.GetLookups() != 2 || n.GetLookupKeys() != 5 || n.GetHitKeys() != 4 ||
		n.GetLeasesActive() != 1 {
		t.Errorf("sum: %v", n)
	}
	var tiers []string
	for _, t := range n.GetTiers() {
		tiers = append(tiers, fmt.Sprintf("%s:%d:%d", strings.ToLower(strings.TrimPrefix(t.GetTier().String(), "TIER_")), t.GetPages(), t.GetUsedBytes()))
	}
	if want := []string{"gpu:1:10", "host:4:40"}; !slices.Equal(tiers, want) {
		t.Errorf("tiers %q, want %q", tiers, want)
	}
	if h := got[0].Holders(); !slices.Equal(h, []string{"a", "b"}) {
		t.Errorf("holders %q, want a and b (c has no pages)", h)
	}
	if h := got[1].Holders(); len(h) != 0 {
		t.Errorf("holders of an empty namespace: %q", h)
	}
}

func TestDialTarget(t *testing.T) {
	for _, c := range []struct{ grpc, gossip, want string }{
		{"127.0.0.1:7070", "127.0.0.1:7946", "127.0.0.1:7070"},
		{"node-3.strata:7070", "10.0.0.3:7946", "node-3.strata:7070"},
		{"[::]:7070", "10.0.0.3:7946", "10.0.0.3:7070"},
		{"0.0.0.0:7070", "[fd00::3]:7946", "[fd00::3]:7070"},
		{":7070", "10.0.0.3:7946", "10.0.0.3:7070"},
		{"[::]:7070", "", "[::]:7070"},
		{"[::]:7070", "0.0.0.0:7946", "[::]:7070"},
		{"not an address", "10.0.0.3:7946", "not an address"},
	} {
		if got := dialTarget(&pb.Member{GrpcAddress: c.grpc, GossipAddress: c.gossip}); got != c.want {
			t.Errorf("dialTarget(%q, gossip %q) = %q, want %q", c.grpc, c.gossip, got, c.want)
		}
	}
}

func TestSettle(t *testing.T) {
	m := func(id string) *Member {
		return &Member{Member: &pb.Member{NodeId: id}, Addr: "127.0.0.1:" + id[len(id)-1:]}
	}
	ok := Reply[int]{Member: m("n1"), Val: 1}
	down := Reply[int]{Member: m("n2"), Err: &NodeError{NodeID: "n2", Addr: "127.0.0.1:2", Err: errors.New("refused")}}
	for _, c := range []struct {
		name             string
		replies          []Reply[int]
		answered, failed int
		fanout           bool // a *FanoutError
		changeFails      bool // settleAll fails
	}{
		{"all answered", []Reply[int]{ok, ok}, 2, 0, false, false},
		{"some failed", []Reply[int]{ok, down}, 1, 1, false, true},
		{"all failed", []Reply[int]{down, down}, 0, 2, true, true},
	} {
		answered, failed, err := settle(c.replies)
		_, fanout := errors.AsType[*FanoutError](err)
		if len(answered) != c.answered || len(failed) != c.failed || fanout != c.fanout || (err != nil) != c.fanout {
			t.Errorf("%s: %d answered, %d failed, err %v", c.name, len(answered), len(failed), err)
		}
		rs, err := settleAll(c.replies)
		if len(rs) != len(c.replies) || (err != nil) != c.changeFails {
			t.Errorf("%s: settleAll: %d replies, err %v", c.name, len(rs), err)
		}
	}
	if _, _, err := settle[int](nil); !errors.Is(err, ErrNoMembers) {
		t.Errorf("none asked: %v", err)
	}
}

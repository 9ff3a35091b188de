package admin

import (
	"bytes"
	"cmp"
	"slices"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// NodeNamespace is one node's report of one namespace.
type NodeNamespace struct {
	Node string // node ID
	Info *pb.NamespaceInfo
}

// Namespace is one namespace summed over the nodes that report it.
type Namespace struct {
	Info  *pb.NamespaceInfo // the sums; descriptor, page size and creation from the reports
	Parts []NodeNamespace   // each node's report, in member order
}

// Holders is the IDs of the nodes that hold pages of the namespace.
func (n *Namespace) Holders() []string {
	out := []string{}
	for _, p := range n.Parts {
		if p.Info.GetPages() > 0 {
			out = append(out, p.Node)
		}
	}
	return out
}

// sumNamespaces sums reports by namespace ID, in the order each ID first
// appears.
func sumNamespaces(parts []NodeNamespace) []*Namespace {
	var out []*Namespace
	byID := map[string]*Namespace{}
	for _, p := range parts {
		t, ok := byID[string(p.Info.GetId())]
		if !ok {
			t = &Namespace{Info: &pb.NamespaceInfo{Id: p.Info.GetId()}}
			byID[string(p.Info.GetId())] = t
			out = append(out, t)
		}
		t.Parts = append(t.Parts, p)
		AddNamespace(t.Info, p.Info)
	}
	return out
}

// AddNamespace adds n's counts to sum. The descriptor and page size are
// the first report's (every node derives them from the same descriptor);
// created is the earliest; the TTL is the longest any node has.
func AddNamespace(sum, n *pb.NamespaceInfo) {
	if sum.Descriptor_ == nil {
		sum.Descriptor_ = n.GetDescriptor_()
	}
	if sum.PageBytes == 0 {
		sum.PageBytes = n.GetPageBytes()
	}
	if c := n.GetCreatedUnixMs(); c != 0 && (sum.CreatedUnixMs == 0 || c < sum.CreatedUnixMs) {
		sum.CreatedUnixMs = c
	}
	sum.Pages += n.GetPages()
	sum.Bytes += n.GetBytes()
	sum.Lookups += n.GetLookups()
	sum.LookupKeys += n.GetLookupKeys()
	sum.HitKeys += n.GetHitKeys()
	sum.LeasesActive += n.GetLeasesActive()
	sum.ExpiredPages += n.GetExpiredPages()
	sum.TtlMs = max(sum.TtlMs, n.GetTtlMs())
	sum.Tiers = addTiers(sum.Tiers, n.GetTiers())
}

// addTiers adds each of ts to the entry of its tier in sum, and keeps sum
// ordered fastest tier first.
func addTiers(sum, ts []*pb.TierStats) []*pb.TierStats {
	for _, t := range ts {
		i := slices.IndexFunc(sum, func(s *pb.TierStats) bool { return s.GetTier() == t.GetTier() })
		if i < 0 {
			sum = append(sum, &pb.TierStats{Tier: t.GetTier()})
			i = len(sum) - 1
		}
		sum[i].CapacityBytes += t.GetCapacityBytes()
		sum[i].UsedBytes += t.GetUsedBytes()
		sum[i].Pages += t.GetPages()
		sum[i].SlotBytes += t.GetSlotBytes()
	}
	slices.SortStableFunc(sum, func(a, b *pb.TierStats) int { return cmp.Compare(a.GetTier(), b.GetTier()) })
	return sum
}

// nodeKeys is one node's listing of a namespace's keys, in key order.
type nodeKeys struct {
	node string
	keys []*pb.KeyInfo
	more bool // the node may hold keys after these
}

// KeyRow is one copy of a key and the node that holds it.
type KeyRow struct {
	Node string // node ID
	Info *pb.KeyInfo
}

// mergeKeys merges per-node listings into key order; a key several nodes
// hold comes once per node, in the order of lists. It stops after limit
// rows (0: none), but never between two rows of one key, so that a
// listing after the last key listed continues without losing a copy.
// next is that last key when more keys may follow, else nil.
//
// Each list need only hold its node's first limit keys: any key among the
// first limit rows of the merge is among its own node's first limit.
// lists are few (one per node), so the smallest head is found by a scan.
func mergeKeys(lists []nodeKeys, limit int) (rows []KeyRow, next []byte) {
	pos := make([]int, len(lists))
	for {
		best := -1
		for i, l := range lists {
			if pos[i] < len(l.keys) &&
				(best < 0 || bytes.Compare(l.keys[pos[i]].GetKey(), lists[best].keys[pos[best]].GetKey()) < 0) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		k := lists[best].keys[pos[best]]
		if limit > 0 && len(rows) >= limit && !bytes.Equal(k.GetKey(), rows[len(rows)-1].Info.GetKey()) {
			return rows, rows[len(rows)-1].Info.GetKey()
		}
		rows = append(rows, KeyRow{Node: lists[best].node, Info: k})
		pos[best]++
	}
	for _, l := range lists {
		if l.more && len(rows) > 0 {
			return rows, rows[len(rows)-1].Info.GetKey()
		}
	}
	return rows, nil
}

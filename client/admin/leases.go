package admin

import (
	"bytes"
	"cmp"
	"context"
	"slices"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// LeaseRow is one lease and the node that holds it.
type LeaseRow struct {
	Node string // node ID
	Info *pb.LeaseInfo
}

// Leases lists the active read leases (of tenant, or all the token may
// see; "" for all) on every askable member, soonest expiry first, at most
// limit of them (0: all). total counts the leases that matched, listed or
// not. failed is the members that failed: their leases are missing.
func (c *Cluster) Leases(ctx context.Context, tenant string, limit int) (rows []LeaseRow, total uint64,
	failed []*NodeError, err error) {
	rs := gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.ListLeasesResponse, error) {
		return call(ctx, c, n.admin.ListLeases, &pb.ListLeasesRequest{Tenant: tenant, Limit: uint32(limit)})
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, 0, failed, err
	}
	for _, r := range answered {
		total += max(r.Val.GetTotal(), uint64(len(r.Val.GetLeases())))
		for _, l := range r.Val.GetLeases() {
			rows = append(rows, LeaseRow{Node: r.Member.GetNodeId(), Info: l})
		}
	}
	slices.SortFunc(rows, func(a, b LeaseRow) int {
		return cmp.Or(cmp.Compare(a.Info.GetExpiresUnixMs(), b.Info.GetExpiresUnixMs()),
			cmp.Compare(a.Node, b.Node), cmp.Compare(a.Info.GetLeaseId(), b.Info.GetLeaseId()),
			bytes.Compare(a.Info.GetNamespaceId(), b.Info.GetNamespaceId()))
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, total, failed, nil
}

package admin

import (
	"cmp"
	"context"
	"slices"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// RoomRow is one transfer room's record and the node that holds it (the
// owner of the room's key).
type RoomRow struct {
	Node string // node ID
	Info *pb.RoomInfo
}

// Rooms lists the transfer rooms (of tenant, or all the token may see;
// "" for all) on every askable member, live attempts and the records of
// ended ones, oldest first. failed is the members that failed, a node
// older than the Transfer service among them: their rooms are missing.
func (c *Cluster) Rooms(ctx context.Context, tenant string) (rows []RoomRow, failed []*NodeError, err error) {
	rs := gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.ListRoomsResponse, error) {
		return call(ctx, c, n.transfer.ListRooms, &pb.ListRoomsRequest{Tenant: tenant})
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, failed, err
	}
	for _, r := range answered {
		for _, info := range r.Val.GetRooms() {
			rows = append(rows, RoomRow{Node: r.Member.GetNodeId(), Info: info})
		}
	}
	slices.SortFunc(rows, func(a, b RoomRow) int {
		return cmp.Or(cmp.Compare(a.Info.GetOpenedUnixMs(), b.Info.GetOpenedUnixMs()), cmp.Compare(a.Node, b.Node),
			cmp.Compare(a.Info.GetTenant(), b.Info.GetTenant()), cmp.Compare(a.Info.GetRoom(), b.Info.GetRoom()))
	})
	return rows, failed, nil
}

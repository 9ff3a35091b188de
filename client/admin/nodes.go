package admin

import (
	"context"
	"slices"
	"strings"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// NodeReport is a member of the view and what it said about itself.
type NodeReport struct {
	*Member
	Info *pb.NodeInfoResponse // nil when not asked (dead, left) or when it failed
	Err  *NodeError           // why an asked member gave no info
}

// Nodes asks every askable member for NodeInfo in parallel and returns a
// report for every member of the view, in view order. It does not fail:
// a member that does not answer has its error in its report.
func (c *Cluster) Nodes(ctx context.Context) []NodeReport {
	rs := gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.NodeInfoResponse, error) {
		return call(ctx, c, n.admin.NodeInfo, &pb.NodeInfoRequest{})
	})
	out := make([]NodeReport, 0, len(c.members))
	for _, m := range c.members {
		r := NodeReport{Member: m}
		if i := slices.IndexFunc(rs, func(r Reply[*pb.NodeInfoResponse]) bool { return r.Member == m }); i >= 0 {
			r.Info, r.Err = rs[i].Val, rs[i].Err
		}
		out = append(out, r)
	}
	return out
}

// Status is the cluster as the node asked sees it, with every member's
// own figures.
type Status struct {
	View    *pb.MembersResponse
	Nodes   []NodeReport // every member, in view order
	Members MemberCounts
	Asked   *pb.NodeInfoResponse // the node asked's own info (etcd as it sees it); nil when it gave none
	Tiers   []*pb.TierStats      // summed over the nodes that answered, fastest first
	// TierNodes counts the nodes that answered with each tier.
	TierNodes map[pb.Tier]int
}

// MemberCounts counts the members of the view by state, and those that
// answered NodeInfo.
type MemberCounts struct {
	Total, Alive, Suspect, Dead, Left, Answered int
}

// Status asks every askable member for NodeInfo (see Nodes) and sums what
// they said.
func (c *Cluster) Status(ctx context.Context) Status {
	s := Status{View: c.view, Nodes: c.Nodes(ctx), TierNodes: map[pb.Tier]int{}}
	for _, r := range s.Nodes {
		s.Members.Total++
		switch r.GetState() {
		case pb.MemberState_MEMBER_STATE_ALIVE:
			s.Members.Alive++
		case pb.MemberState_MEMBER_STATE_SUSPECT:
			s.Members.Suspect++
		case pb.MemberState_MEMBER_STATE_DEAD:
			s.Members.Dead++
		case pb.MemberState_MEMBER_STATE_LEFT:
			s.Members.Left++
		}
		if r.Info == nil {
			continue
		}
		s.Members.Answered++
		s.Tiers = addTiers(s.Tiers, r.Info.GetTiers())
		for _, t := range r.Info.GetTiers() {
			s.TierNodes[t.GetTier()]++
		}
		if r.GetNodeId() == c.view.GetNodeId() {
			s.Asked = r.Info
		}
	}
	return s
}

// Usage sums what each tenant holds over the members that answered
// NodeInfo, in tenant order (a tenant token sees only its own tenant), and
// returns the errors of the members asked that did not answer.
func (c *Cluster) Usage(ctx context.Context) (usage []*pb.TenantUsage, answered int, failed []*NodeError) {
	sum := map[string]*pb.TenantUsage{}
	for _, r := range c.Nodes(ctx) {
		if r.Err != nil {
			failed = append(failed, r.Err)
		}
		if r.Info == nil {
			continue
		}
		answered++
		for _, u := range r.Info.GetTenants() {
			s := sum[u.GetTenant()]
			if s == nil {
				s = &pb.TenantUsage{Tenant: u.GetTenant()}
				sum[u.GetTenant()] = s
				usage = append(usage, s)
			}
			s.Bytes += u.GetBytes()
			s.ReservedBytes += u.GetReservedBytes()
			s.Reservations += u.GetReservations()
			s.Slots += u.GetSlots()
			s.SlotBytes += u.GetSlotBytes()
			s.Leases += u.GetLeases()
		}
	}
	slices.SortFunc(usage, func(a, b *pb.TenantUsage) int { return strings.Compare(a.GetTenant(), b.GetTenant()) })
	return usage, answered, failed
}

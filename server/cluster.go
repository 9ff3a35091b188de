package server

import (
	"context"

	"github.com/stratakv/strata/membership"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/tiers"
)

// Members answers the membership view clients route by.
func (s *Server) Members(ctx context.Context, _ *pb.MembersRequest) (*pb.MembersResponse, error) {
	if _, err := s.callerOf(ctx); err != nil {
		return nil, toStatus(err)
	}
	return s.view(), nil
}

// WatchMembers sends the view now and after every change until the client
// goes away or the server stops.
func (s *Server) WatchMembers(_ *pb.MembersRequest, stream pb.Cluster_WatchMembersServer) error {
	ctx := stream.Context()
	if _, err := s.callerOf(ctx); err != nil {
		return toStatus(err)
	}
	var changed <-chan struct{}
	if m := s.cfg.Membership; m != nil {
		ch, unsubscribe := m.Subscribe()
		defer unsubscribe()
		changed = ch
	}
	for {
		if err := stream.Send(s.view()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping:
			return nil
		case <-changed:
		}
	}
}

// view is the membership as this node sees it; a node without membership
// is a cluster of one.
func (s *Server) view() *pb.MembersResponse {
	resp := &pb.MembersResponse{NodeId: s.cfg.NodeID}
	m := s.cfg.Membership
	if m == nil {
		st := s.cfg.Store.Stats()
		self := &pb.Member{NodeId: s.cfg.NodeID, GrpcAddress: s.cfg.Address, State: pb.MemberState_MEMBER_STATE_ALIVE}
		for _, t := range st.Tiers {
			self.Tiers = append(self.Tiers, &pb.TierStats{Tier: TierProto(t.Kind), CapacityBytes: uint64(t.Capacity), UsedBytes: uint64(t.Used)})
			self.Weight += float64(t.Capacity)
		}
		resp.Members = []*pb.Member{self}
		return resp
	}
	for _, mem := range m.Members() {
		pm := &pb.Member{NodeId: mem.NodeID, GrpcAddress: mem.GRPCAddress, GossipAddress: mem.GossipAddress,
			State: memberState(mem.State)}
		for _, t := range mem.Meta.Tiers {
			pm.Tiers = append(pm.Tiers, &pb.TierStats{Tier: tierByName(t.Kind), CapacityBytes: uint64(t.Capacity), UsedBytes: uint64(t.Used)})
			pm.Weight += float64(t.Capacity)
		}
		resp.Members = append(resp.Members, pm)
	}
	return resp
}

func memberState(s membership.State) pb.MemberState {
	switch s {
	case membership.Alive:
		return pb.MemberState_MEMBER_STATE_ALIVE
	case membership.Suspect:
		return pb.MemberState_MEMBER_STATE_SUSPECT
	case membership.Dead:
		return pb.MemberState_MEMBER_STATE_DEAD
	case membership.Left:
		return pb.MemberState_MEMBER_STATE_LEFT
	}
	return pb.MemberState_MEMBER_STATE_UNSPECIFIED
}

// tierByName is the wire name of a tier named as in gossip metadata.
func tierByName(name string) pb.Tier {
	for _, k := range []tiers.Kind{tiers.KindGPU, tiers.KindHost, tiers.KindSSD} {
		if k.String() == name {
			return TierProto(k)
		}
	}
	return pb.Tier_TIER_UNSPECIFIED
}

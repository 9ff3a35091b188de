package server

import (
	"context"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// CoordState is the eviction coordination a node applies (docs/design.md §5.4).
type CoordState struct {
	// Coordinator published the applied cutoffs; "" when the node uses
	// local cutoffs.
	Coordinator string
	// Epoch and Round identify the publication; 0 when local.
	Epoch, Round uint64
	// Coordinated is false while the node uses local cutoffs.
	Coordinated bool
	// Worth is the applied floor per tier of the store, in tier order.
	Worth []float64
}

// Coordination reports the node's eviction coordination for the Cluster
// service.
type Coordination interface {
	CoordState() CoordState
}

// Members answers the membership view clients route by.
func (s *Server) Members(ctx context.Context, _ *pb.MembersRequest) (*pb.MembersResponse, error) {
	if _, err := s.callerOf(ctx); err != nil {
		return nil, err
	}
	return s.view(), nil
}

// WatchMembers sends the view now and after every change until the client
// goes away or the server stops.
func (s *Server) WatchMembers(_ *pb.MembersRequest, stream pb.Cluster_WatchMembersServer) error {
	ctx := stream.Context()
	if _, err := s.callerOf(ctx); err != nil {
		return err
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
	s.addCutoffs(resp)
	m := s.cfg.Membership
	if m == nil {
		st := s.storeStats()
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
			State: memberState(mem.State), RawAddress: mem.Meta.RawAddress}
		for _, t := range mem.Meta.Tiers {
			pm.Tiers = append(pm.Tiers, &pb.TierStats{Tier: tierByName(t.Kind), CapacityBytes: uint64(t.Capacity), UsedBytes: uint64(t.Used)})
			pm.Weight += float64(t.Capacity)
		}
		resp.Members = append(resp.Members, pm)
	}
	return resp
}

func memberState(s membership.State) pb.MemberState { return memberWire[s] }

var memberWire = map[membership.State]pb.MemberState{membership.Alive: pb.MemberState_MEMBER_STATE_ALIVE,
	membership.Suspect: pb.MemberState_MEMBER_STATE_SUSPECT, membership.Dead: pb.MemberState_MEMBER_STATE_DEAD,
	membership.Left: pb.MemberState_MEMBER_STATE_LEFT}

// tierByName is the wire name of a tier named as in gossip metadata.
func tierByName(name string) pb.Tier {
	for _, k := range []tiers.Kind{tiers.KindGPU, tiers.KindHost, tiers.KindSSD} {
		if k.String() == name {
			return TierProto(k)
		}
	}
	return pb.Tier_TIER_UNSPECIFIED
}

// addCutoffs sets the coordinator and the cutoffs this node applies.
func (s *Server) addCutoffs(resp *pb.MembersResponse) {
	if s.cfg.Coordination == nil {
		return
	}
	st := s.cfg.Coordination.CoordState()
	resp.Coordinator = st.Coordinator
	cs := &pb.CutoffState{Epoch: st.Epoch, Coordinated: st.Coordinated, Round: st.Round}
	for i, k := range s.tierKinds() {
		var w float64
		if i < len(st.Worth) {
			w = st.Worth[i]
		}
		cs.Tiers = append(cs.Tiers, &pb.TierCutoff{Tier: TierProto(k), Worth: w})
	}
	resp.Cutoffs = cs
}

// Hints applies a batch of remote-child hints from another node to the
// store: the sender holds (or dropped) a child of a parent page this node
// owns, or (gone) dropped a page whose children may be here, which are
// then orphans (store.ParentsGone). Only an admin caller (the nodes use
// the admin token) may send them when the node checks tokens. A malformed
// hint fails the whole batch, before any is applied.
func (s *Server) Hints(ctx context.Context, req *pb.HintsRequest) (*pb.HintsResponse, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.checkHints(c, len(req.GetHints())); err != nil {
		return nil, err
	}
	hints := make([]store.ChildHint, len(req.GetHints()))
	for i, h := range req.GetHints() {
		if len(h.GetNamespaceId()) != namespace.IDSize || len(h.GetParentKey()) != namespace.KeySize {
			return nil, badRequest("hint %d: namespace id of %d bytes, parent key of %d", i,
				len(h.GetNamespaceId()), len(h.GetParentKey()))
		}
		hints[i] = store.ChildHint{NS: namespace.ID(h.GetNamespaceId()), Parent: namespace.Key(h.GetParentKey()),
			Added: h.GetAdded(), Worth: h.GetWorth(), Gone: h.GetGone()}
	}
	s.applyHints(hints)
	return &pb.HintsResponse{Applied: uint32(len(hints))}, nil
}

package server

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// ListNamespaces lists the namespaces the caller may see.
func (s *Server) ListNamespaces(ctx context.Context, req *pb.ListNamespacesRequest) (*pb.ListNamespacesResponse, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pb.ListNamespacesResponse{NodeId: s.cfg.NodeID}
	for _, st := range s.namespaces(c, req.GetTenant()) {
		resp.Namespaces = append(resp.Namespaces, s.namespaceInfo(st))
	}
	return resp, nil
}

// GetNamespace describes one namespace, by ID or unique hex prefix.
func (s *Server) GetNamespace(ctx context.Context, req *pb.GetNamespaceRequest) (*pb.GetNamespaceResponse, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	var match []store.NamespaceStats
	prefix := strings.ToLower(req.GetIdPrefix())
	for _, st := range s.namespaces(c, "") {
		if string(req.GetNamespaceId()) == string(st.ID[:]) ||
			(prefix != "" && strings.HasPrefix(st.ID.String(), prefix)) {
			match = append(match, st)
		}
	}
	switch {
	case len(req.GetNamespaceId()) == 0 && prefix == "":
		return nil, badRequest("no namespace id or prefix")
	case len(match) == 0:
		return nil, errorf(store.ErrNamespaceNotFound, "no namespace matches %q%x", prefix, req.GetNamespaceId())
	case len(match) > 1:
		return nil, badRequest("prefix %q matches %d namespaces", prefix, len(match))
	}
	return &pb.GetNamespaceResponse{Namespace: s.namespaceInfo(match[0]), NodeId: s.cfg.NodeID}, nil
}

func (s *Server) namespaceInfo(st store.NamespaceStats) *pb.NamespaceInfo {
	info := &pb.NamespaceInfo{Id: st.ID[:], PageBytes: uint64(st.PageBytes), Pages: uint64(st.Pages),
		Bytes: uint64(st.Bytes), CreatedUnixMs: st.Created.UnixMilli(), Lookups: st.Lookups,
		LookupKeys: st.LookupKeys, HitKeys: st.HitKeys, LeasesActive: uint64(st.Leases),
		TtlMs: uint64(st.TTL.Milliseconds()), ExpiredPages: st.Expired}
	if d, ok := s.descriptor(st.ID); ok {
		info.Descriptor_ = pbconv.DescriptorProto(d)
	}
	kinds := s.tierKinds()
	for i, pages := range st.TierPages {
		info.Tiers = append(info.Tiers, &pb.TierStats{Tier: TierProto(kinds[i]), Pages: uint64(pages),
			UsedBytes: uint64(pages) * uint64(st.PageBytes)})
	}
	return info
}

// ListKeys pages through a namespace's keys in key order.
func (s *Server) ListKeys(ctx context.Context, req *pb.ListKeysRequest) (*pb.ListKeysResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	var after *namespace.Key
	if a := req.GetAfterKey(); len(a) > 0 {
		k, err := namespace.KeyFromBytes(a)
		if err != nil {
			return nil, badRequest("after key: %v", err)
		}
		after = &k
	}
	infos, next, err := s.listKeys(n, after, int(req.GetLimit()))
	if err != nil {
		return nil, err
	}
	resp := &pb.ListKeysResponse{NodeId: s.cfg.NodeID}
	for _, ki := range infos {
		resp.Keys = append(resp.Keys, keyInfo(ki))
	}
	if next != nil {
		resp.NextAfterKey = next[:]
	}
	return resp, nil
}

// StatKeys describes keys; absent keys come back with an empty key.
func (s *Server) StatKeys(ctx context.Context, req *pb.StatKeysRequest) (*pb.StatKeysResponse, error) {
	n, keys, err := s.namespaceKeys(ctx, req.GetNamespaceId(), req.GetKeys())
	if err != nil {
		return nil, err
	}
	infos, ok, err := s.stat(n, keys)
	if err != nil {
		return nil, err
	}
	resp := &pb.StatKeysResponse{NodeId: s.cfg.NodeID, Keys: make([]*pb.KeyInfo, len(keys))}
	for i := range infos {
		if ok[i] {
			resp.Keys[i] = keyInfo(infos[i])
		} else {
			resp.Keys[i] = &pb.KeyInfo{}
		}
	}
	return resp, nil
}

func keyInfo(ki store.KeyInfo) *pb.KeyInfo {
	out := &pb.KeyInfo{Key: ki.Key[:], Depth: ki.Depth, Size: uint64(ki.Size), Checksum: ki.Checksum,
		Tier: TierProto(ki.Tier), CreatedUnixMs: ki.Created.UnixMilli(), LastAccessUnixMs: ki.Accessed.UnixMilli(),
		Leases: uint32(ki.Leases), Hits: uint64(ki.Hits), ResidentChildren: uint32(ki.Children), Orphan: ki.Orphan,
		CostHint: ki.CostHint}
	if ki.HasParent {
		out.ParentKey = ki.Parent[:]
	}
	return out
}

// TierProto is the wire name of a kind of tier.
func TierProto(k tiers.Kind) pb.Tier { return tierWire[k] }

var tierWire = map[tiers.Kind]pb.Tier{tiers.KindGPU: pb.Tier_TIER_GPU, tiers.KindHost: pb.Tier_TIER_HOST,
	tiers.KindSSD: pb.Tier_TIER_SSD}

// NodeInfo describes this node and its tiers.
func (s *Server) NodeInfo(ctx context.Context, _ *pb.NodeInfoRequest) (*pb.NodeInfoResponse, error) {
	who, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	st, open := s.storeStats(), s.openReservations()
	resp := &pb.NodeInfoResponse{NodeId: s.cfg.NodeID, GrpcAddress: s.cfg.Address, Pages: uint64(st.Pages),
		Reservations: uint64(open.Reservations), Slots: uint64(open.Slots), SlotBytes: uint64(open.SlotBytes),
		LeasesActive: uint64(st.Leases), StartedUnixMs: s.started.UnixMilli(), Version: s.cfg.Version, Evictions: st.Evictions,
		Demotions: st.Demotions, CorruptPages: st.Corrupt, Recovery: s.cfg.Recovery}
	if m := s.cfg.Membership; m != nil {
		resp.GossipAddress = m.GossipAddress()
	}
	if r := s.cfg.Registry; r != nil {
		resp.EtcdEndpoints = r.Endpoints()
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.Health(hctx)
		cancel()
		resp.EtcdHealthy = err == nil
		if err != nil {
			resp.EtcdError = err.Error()
		}
	}
	for i, t := range st.Tiers {
		resp.Tiers = append(resp.Tiers, &pb.TierStats{Tier: TierProto(t.Kind), CapacityBytes: uint64(t.Capacity),
			UsedBytes: uint64(t.Used), Pages: uint64(st.TierPages[i]), Fault: t.Fault.String(),
			SlotBytes: uint64(open.TierSlotBytes[i])})
	}
	resp.Tenants = tenantUsage(s.usage(who), open.Tenants)
	resp.EventStreams = s.eventStreams(who)
	return resp, nil
}

// eventStreams is the node's KV event streams caller c may see.
func (s *Server) eventStreams(c caller) []*pb.EventStreamInfo {
	if s.cfg.Events == nil {
		return nil
	}
	var out []*pb.EventStreamInfo
	for _, e := range s.cfg.Events.EventStreams() {
		if c.mayUse(e.Tenant) != nil {
			continue
		}
		info := &pb.EventStreamInfo{Tenant: e.Tenant, PubAddress: e.Pub, ReplayAddress: e.Replay, Incarnation: e.Incarnation,
			NextSeq: e.Seq, Events: e.Events, Batches: e.Batches, ReplayRequests: e.Replays, Overruns: e.Overruns,
			Resyncs: e.Resyncs, SubscriberDrops: e.SubscriberDrops, Subscribers: uint32(e.Subscribers)}
		if !e.LastEvent.IsZero() {
			info.LastEventUnixMs = e.LastEvent.UnixMilli()
		}
		out = append(out, info)
	}
	return out
}

// tenantUsage is what each tenant of u holds, in tenant order (u is what
// the caller may see: s.usage). Its open reservations are open's split
// (slots apart), which u's lump together as its quotas count them.
func tenantUsage(u map[string]store.Usage, open map[string]store.OpenCounts) []*pb.TenantUsage {
	var out []*pb.TenantUsage
	for t, v := range u {
		o := open[t]
		out = append(out, &pb.TenantUsage{Tenant: t, Bytes: uint64(v.Bytes), ReservedBytes: uint64(o.ReserveBytes),
			Reservations: uint64(o.Reservations), Slots: uint64(o.Slots), SlotBytes: uint64(o.SlotBytes),
			Leases: uint64(v.Leases)})
	}
	slices.SortFunc(out, func(a, b *pb.TenantUsage) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out
}

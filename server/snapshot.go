package server

import (
	"context"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// What a cache-aware router asks a node besides its KV event stream
// (docs/design.md §15): a dump of a namespace's pages at a point of the
// stream, for a consumer that joins late (SnapshotKeys), and how much of a
// prompt the node holds, per tier (QueryPrefix; over HTTP, indexer.go).

// Snapshots takes the dumps SnapshotKeys serves: the node, which owns both
// the store and the streams.
type Snapshots interface {
	// Snapshot lists n's pages at a point of its tenant's KV event stream.
	// It fails with an error wrapping ErrNoEventStream when n publishes no
	// stream, ErrEventsBusy when the stream's queue is full.
	Snapshot(ctx context.Context, n store.Namespace) (Snapshot, error)
}

// Snapshot is a namespace's pages at one point of its stream.
type Snapshot struct {
	// Seq is the sequence number of the stream's first batch after the
	// dump: the dump holds every change of the batches before it, none of
	// those from it on.
	Seq         uint64
	Incarnation uint64
	Topic       string
	Keys        []store.Listed // in key order
}

// SnapshotKeys streams a dump of a namespace's pages, a page of keys per
// message.
func (s *Server) SnapshotKeys(req *pb.SnapshotKeysRequest, stream pb.Admin_SnapshotKeysServer) error {
	ctx := stream.Context()
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return toStatus(err)
	}
	if s.cfg.Snapshots == nil {
		return toStatus(errorf(ErrNoEventStream, "namespace %s", n.ID.Short()))
	}
	snap, err := s.cfg.Snapshots.Snapshot(ctx, n)
	if err != nil {
		return toStatus(err)
	}
	size := int(req.GetPageSize())
	if size <= 0 || size > s.cfg.MaxBatch {
		size = min(1000, s.cfg.MaxBatch)
	}
	keys := snap.Keys
	for first := true; first || len(keys) > 0; first = false {
		page := keys[:min(size, len(keys))]
		keys = keys[len(page):]
		resp := &pb.SnapshotKeysResponse{NextSeq: snap.Seq, Incarnation: snap.Incarnation, Topic: snap.Topic,
			Total: uint64(len(snap.Keys)), NodeId: s.cfg.NodeID, Keys: make([]*pb.KeyInfo, len(page))}
		for i, l := range page {
			resp.Keys[i] = &pb.KeyInfo{Key: l.Key[:], Tier: TierProto(l.Tier)}
			if l.HasParent {
				resp.Keys[i].ParentKey = l.Parent[:]
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

// QueryPrefix reports how many of a prompt's pages, from the first, this
// node holds, in any tier and in each.
func (s *Server) QueryPrefix(ctx context.Context, req *pb.QueryPrefixRequest) (*pb.QueryPrefixResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, toStatus(err)
	}
	var keys []namespace.Key
	if len(req.GetKeys()) > 0 {
		keys, err = s.keysOf(req.GetKeys())
	} else {
		keys, err = s.tokenKeys(n, req.GetTokenIds())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	p, err := s.queryPrefix(n, keys)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.QueryPrefixResponse{Longest: uint32(p.longest), PageTokens: n.PageTokens, Pages: uint32(len(keys)),
		NodeId: s.cfg.NodeID}
	for _, t := range p.tiers {
		resp.Tiers = append(resp.Tiers, &pb.TierPrefix{Tier: TierProto(t.kind), Pages: uint32(t.pages)})
	}
	return resp, nil
}

// tokenKeys is the page keys of tokens in n, by its key format (full pages
// only).
func (s *Server) tokenKeys(n store.Namespace, tokens []uint32) ([]namespace.Key, error) {
	d, ok := s.descriptor(n.ID)
	if !ok {
		return nil, badRequest("namespace %s: no descriptor to compute keys from tokens", n.ID.Short())
	}
	if err := s.checkBatch(len(tokens)/int(d.PageTokens), "full pages of tokens"); err != nil {
		return nil, err
	}
	return d.PageKeys(n.ID, tokens), nil
}

// prefix is a QueryPrefix answer: pages from the first held in any tier,
// and per tier those all in it.
type prefix struct {
	longest int
	tiers   []tierPrefix
}

type tierPrefix struct {
	kind  tiers.Kind
	pages int
}

// queryPrefix finds how much of keys n holds, per tier.
func (s *Server) queryPrefix(n store.Namespace, keys []namespace.Key) (prefix, error) {
	if err := s.checkLimit(len(keys), "keys"); err != nil {
		return prefix{}, err
	}
	longest, tier, err := s.prefixTiers(n, keys)
	if err != nil {
		return prefix{}, err
	}
	kinds := s.tierKinds()
	p := prefix{longest: longest, tiers: make([]tierPrefix, len(kinds))}
	for t, k := range kinds {
		p.tiers[t].kind = k
		for p.tiers[t].pages < longest && int(tier[p.tiers[t].pages]) == t {
			p.tiers[t].pages++
		}
	}
	return p, nil
}

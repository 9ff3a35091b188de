package server

import (
	"context"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// What a cache-aware router asks a node besides its KV event stream
// (docs/design.md §15): a dump of a namespace's pages at a point of the
// stream, for a consumer that joins late (SnapshotKeys), and how much of a
// prompt the node or the cluster holds, per tier (QueryPrefix, query.go;
// over HTTP, indexer.go).

// Snapshots takes the dumps SnapshotKeys serves: the node, which owns both
// the store and the streams.
type Snapshots interface {
	// Snapshot dumps n's pages at a point of its tenant's KV event
	// stream, a run of pages per call of send (at least one call; every
	// call carries the same Seq, Incarnation, Topic and Total). It fails
	// with an error wrapping ErrNoEventStream when n publishes no stream,
	// ErrEventsBusy when the stream's queue is full, or send's error.
	Snapshot(ctx context.Context, n store.Namespace, send func(SnapshotRun) error) error
}

// SnapshotRun is a run of a namespace's pages at one point of its stream.
type SnapshotRun struct {
	// Seq is the sequence number of the stream's first batch after the
	// dump: the dump holds every change of the batches before it, none of
	// those from it on.
	Seq         uint64
	Incarnation uint64
	Topic       string
	Total       int            // pages in the whole dump
	Keys        []store.Listed // in key order within the run
}

// SnapshotKeys streams a dump of a namespace's pages, a page of keys per
// message, as the node copies them (store.Admin.Snapshot: a shard at a
// time).
func (s *Server) SnapshotKeys(req *pb.SnapshotKeysRequest, stream pb.Admin_SnapshotKeysServer) error {
	ctx := stream.Context()
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return toStatus(err)
	}
	if s.cfg.Snapshots == nil {
		return toStatus(errorf(ErrNoEventStream, "namespace %s", n.ID.Short()))
	}
	size := int(req.GetPageSize())
	if size <= 0 || size > s.cfg.MaxBatch {
		size = min(1000, s.cfg.MaxBatch)
	}
	var head SnapshotRun
	var pending []store.Listed
	sent := false
	flush := func(all bool) error {
		for len(pending) >= size || all && (len(pending) > 0 || !sent) {
			page := pending[:min(size, len(pending))]
			pending = pending[len(page):]
			resp := &pb.SnapshotKeysResponse{NextSeq: head.Seq, Incarnation: head.Incarnation, Topic: head.Topic,
				Total: uint64(head.Total), NodeId: s.cfg.NodeID, Keys: make([]*pb.KeyInfo, len(page))}
			for i, l := range page {
				resp.Keys[i] = &pb.KeyInfo{Key: l.Key[:], Tier: TierProto(l.Tier)}
				if l.HasParent {
					resp.Keys[i].ParentKey = l.Parent[:]
				}
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
			sent = true
		}
		return nil
	}
	err = s.cfg.Snapshots.Snapshot(ctx, n, func(r SnapshotRun) error {
		head = r
		pending = append(pending, r.Keys...)
		return flush(false)
	})
	if err == nil {
		err = flush(true)
	}
	if err != nil {
		return toStatus(err)
	}
	return nil
}

package client

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
)

// A plane moves one node's part of a call: gRPC streams (grpcPlane,
// grpc.go), the raw tcp data plane (*rawSession, raw_io.go), same-host
// shared memory (*shmSession, shm_io.go) or RDMA (*rdmaSession, rdma.go,
// gets only). Every plane serves the same three data operations; Open,
// leases, Delete and orphan reports are control calls and always go over
// gRPC (node.go).
//
// ok false means the plane could not serve the call and left nothing
// behind that the caller could see: no connection could be had, a node of
// an older protocol lacks the operation, or the connection broke before the
// node answered. The next plane then serves it (a put that published some
// pages before breaking finds them Exists there). gRPC always serves.
type plane interface {
	// lookup asks which of keys (at most the node's batch limit) are
	// present, and with lease leases the hit prefix for ttl.
	lookup(ctx context.Context, h *nodeNS, keys []namespace.Key, lease bool, ttl time.Duration) (res lookupAnswer, ok bool, err error)
	// get reads keys (at most the batch limit) into bufs under lease (may
	// be nil), each page verified, and reports which arrived intact.
	get(ctx context.Context, h *nodeNS, keys []namespace.Key, bufs [][]byte, lease *nodeLease) (found []bool, ok bool, err error)
	// put publishes pages (at most the batch limit, each of the
	// namespace's page size).
	put(ctx context.Context, h *nodeNS, pages []Page) (res []PutResult, ok bool, err error)
}

// planes is the one place a call's planes are chosen: appended to dst,
// best first, are shared memory when the node is on this host and its
// session works, the rdma plane when the client may use it
// (Options.RDMA), the node advertised it and its session works, the raw
// tcp plane when the node advertised it and it has not failed lately, and
// gRPC, always last. mapped false leaves out the two that read the host
// arena (shm and rdma: the pages they found elsewhere). Options.NoShm,
// Options.RDMA and Options.NoRaw keep the first three out (no session is
// ever started for them).
func (h *nodeNS) planes(dst []plane, mapped bool) []plane {
	if mapped {
		if s := h.c.shmSession(h.nodeID); s != nil {
			dst = append(dst, s)
		}
		if s := h.rdmaFor(); s != nil {
			dst = append(dst, s)
		}
	}
	if s := h.rawFor(); s != nil {
		dst = append(dst, s)
	}
	return append(dst, grpcPlane{})
}

// getOthers reads the pages of keys at the indexes others, which a plane
// reading the host arena (shm, rdma) left (pages in other tiers, copies
// that raced a reclaim), on the planes after it, under lease, into their
// bufs, and sets found for those that arrived.
func (h *nodeNS) getOthers(ctx context.Context, keys []namespace.Key, bufs [][]byte, lease *nodeLease, others []int, found []bool) error {
	sub, subBufs := make([]namespace.Key, len(others)), make([][]byte, len(others))
	for j, i := range others {
		sub[j], subBufs[j] = keys[i], bufs[i]
	}
	got, err := h.get(ctx, sub, subBufs, lease, false)
	for j, i := range others {
		found[i] = j < len(got) && got[j] // results stand beside an error that has them
	}
	return err
}

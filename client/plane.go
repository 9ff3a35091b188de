package client

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
)

// A plane moves one node's part of a call: gRPC streams (grpcPlane,
// grpc.go), the raw tcp data plane (*rawSession, raw_io.go) or same-host
// shared memory (*shmSession, shm_io.go). Every plane serves the same
// three data operations; Open, leases, Delete and orphan reports are
// control calls and always go over gRPC (node.go).
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
// session works (and shm is true), the raw tcp plane when the node
// advertised it and it has not failed lately, and gRPC, always last.
// Options.NoShm and Options.NoRaw keep the first two out (no session is
// ever started for them).
func (h *nodeNS) planes(dst []plane, shm bool) []plane {
	if shm {
		if s := h.c.shmSession(h.nodeID); s != nil {
			dst = append(dst, s)
		}
	}
	if s := h.rawFor(); s != nil {
		dst = append(dst, s)
	}
	return append(dst, grpcPlane{})
}

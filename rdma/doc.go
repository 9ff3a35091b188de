// Package rdma is strata's RDMA plane mechanics (docs/design.md, the data
// planes): RDMA READ and WRITE between registered memory over
// reliable-connected queue pairs, through libibverbs. It is the only
// package that links libibverbs, with cgo, in builds with the rdma tag
// (Linux, cgo, libibverbs-dev); in other builds Open fails with
// ErrUnavailable saying why, and the rest of the package (configuration,
// endpoints, the books of registered memory) is the same.
//
// # Shape
//
// A Device is an open RDMA device and its protection domain. Memory is
// registered on it as Regions; Pairs (a queue pair and its completion
// queue) are made on it. Two sides swap Endpoints out of band (strata's
// client and node over the Rdma gRPC stream) and Connect; then one side
// reads or writes the other's registered memory with Read and Write, whose
// Ops name an offset in the peer's memory and a buffer in a local Region.
//
// # Invariants
//
//   - Registered memory must not move or be freed while registered: it
//     comes from mmap (a node's host arena, a client's bounce buffer),
//     never the Go heap.
//   - Every Region is deregistered exactly once (Memory keeps the books):
//     by its owner, or by the Device's Close, which reports it as leaked.
//     A second Deregister is refused with ErrDeregistered: ibv_dereg_mr of
//     a freed region would be a use after free.
//   - Every op's buffer lies in the local Region and its extent in the
//     peer's registered memory, checked before anything is posted
//     (ErrOutOfRange): the device would otherwise fail the queue pair, or
//     read memory the caller did not mean.
//   - A Device closes only once its Pairs are closed: a protection domain
//     with queue pairs cannot be freed.
//
// # What a remote reader is trusted with
//
// A peer that holds a region's rkey may read any byte of it. A node that
// registers its host arena therefore lets every connected client read every
// tenant's pages there, as shared memory does for same-host clients; it
// connects only the clients it would let map the arena (server/rdma.go).
package rdma

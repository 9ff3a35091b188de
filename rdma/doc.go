// Package rdma is strata's data plane (DESIGN 7): one transfer abstraction,
// batches of copies between page extents on a node and caller buffers
// (Op, Transport), with three backends.
//
//   - shm: a client on the node's host maps the node's host-tier arena and
//     its slot generations (memfds received over a Unix socket, see Conn and
//     the framing in frame.go) and copies pages with one memcpy each. A
//     read re-checks the extent's generation word after the copy, so a copy
//     that raced a reclaim (a page evicted or deleted meanwhile, a lease
//     that expired) is reported as a miss, never as bytes; pages under the
//     reader's lease are pinned, so for them the check never fails. Writes
//     go into extents of open reservations; the node verifies size and
//     checksum at commit before anything is published.
//   - tcp: for clients on other hosts, the same framing over TCP with page
//     bytes inline (stream.go): a Read is answered by a frame per page
//     whose bytes the node writes straight from the pinned page (one
//     writev) and the client reads straight into the caller's buffer; a
//     put is Reserve, Write frames and Commit. The node advertises the
//     address in its OpenNamespace answers (AddrHeader). The gRPC streams
//     of the client package remain the fallback, named here as a backend
//     through a thin adapter (TCP) so callers can treat both alike.
//   - verbs: RDMA READ/WRITE through libibverbs (cgo, build tag rdma), with
//     the arena registered as a memory region. Without the tag OpenVerbs
//     returns ErrNoVerbs.
//
// # Trust
//
// Mapping the arena gives a process every page on the node's host tier,
// of every tenant, read-write. The node therefore accepts shm connections
// only from processes of its own user (SO_PEERCRED; root too), which could
// read its memory anyway, and keeps the socket mode 0600. The tenant token
// sent in the handshake scopes the control requests (which namespaces the
// connection may lease or reserve in) exactly as the gRPC API does.
//
// # Writers and deadlines
//
// A writer fills a reserved extent in place and must finish before the
// reservation's deadline: after it passes, the node frees the extent and
// may hand it to another page. The client checks the extent's generation
// word and the remaining time before it copies, and sends the bytes over
// tcp instead when less than a second is left.
package rdma

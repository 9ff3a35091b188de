// Package transport is the mechanics of strata's data plane (docs/design.md §7):
// moving frame-protocol messages (package proto/frame) and page bytes
// between a client and a node. What the messages mean is the protocol's
// (proto/frame/SPEC.md); this package only carries them.
//
//   - Conn: framed socket I/O over a Unix stream socket (the shm control
//     socket, with the arena and generation memfds passed as SCM_RIGHTS)
//     or over TCP (the raw data plane), where the bulk bytes of Page,
//     Write and Put frames go from the caller's memory to the socket with
//     one writev and from the socket straight into the caller's buffer.
//     SendFramesLent lends bulks of 64 to 256 KiB to the kernel instead
//     (vmsplice and splice through a pipe, Linux): the peer's read copies
//     them from the sender's memory, for senders (a put) that wait for the
//     peer's answer before the bytes may change.
//   - RawSocket: read and writev through the socket's raw system calls,
//     without the runtime's blocking-call path (Linux).
//   - Shm: a node's host-tier arena and its slot generations mapped into a
//     client on the same host, and pages copied with one memcpy each. A
//     read re-checks the extent's generation word after the copy, so a
//     copy that raced a reclaim (a page evicted or deleted meanwhile, a
//     lease that expired) is reported as a miss, never as bytes; pages
//     under the reader's lease are pinned, so for them the check never
//     fails. Writes go into extents of open reservations; the node
//     verifies size and checksum at commit before anything is published.
//
// RDMA (libibverbs, build tag rdma) is package rdma's. Choosing a plane
// per node is the client's (its per-node plane interface), so this package
// has no interface of its own: Shm's unit of Read and Write is Op.
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
package transport

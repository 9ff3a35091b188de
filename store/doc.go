// Package store is one node's page store: the sharded index of published
// pages, checksum-verified two-phase publication, read leases, and the
// reclamation that keeps memory bounded.
//
// # Surface
//
// The exported methods are grouped by the caller that uses them, each
// group a view of the Store (views.go): Reader, the read side a server
// serves (lookups and their leases, reads of page bytes or of their place
// in a mapped arena); Publisher, its write side (publication in two
// phases or one call, granted slots, deletion); Admin, the operator's
// calls and the node's metrics; Evictor, the cross-node eviction driver
// (summaries, cutoffs, remote-child hints); Handoff, what the hinted
// handoff adds to reading (durable tiers, removing handed pages). Store
// itself keeps what every caller shares: its lifecycle (New, Recover,
// DemoteAll, Close) and the namespaces (AddNamespace, Namespace).
//
// Views, not interfaces each caller declares: interfaces would leave every
// method on Store, one list that grew with each caller (48 methods before
// this grouping), and nothing in the store's own API would say who calls
// what. A view makes the group a type: a method's place names its
// caller, the documentation lists each group apart, and a new method has
// to choose its group. A view is a value holding the store, free to copy
// and to hold: the server's request layer asks for Reader and Publisher
// (and Admin, Evictor for the operator's and the cluster's calls),
// eviction/coord holds the Evictor as its coord.Store, the node's metrics
// read Admin and Evictor, peer's handoff lists through Admin, reads through
// Reader and drops what it handed through Handoff.
//
// # Publication (docs/design.md §4.3)
//
// Reserve allocates an extent for each page that is not already published and
// records a reservation (write id, deadline). Write copies bytes into the
// reserved extent; nothing in the index points at it, so no reader can see
// them. Commit closes the reservation to further writes, checks the size the
// writer declares against the reservation, that every byte was written, and
// the checksum over the extent; only then does it insert the page into the
// index. If the key was published meanwhile by another writer the later
// commit answers EXISTS and frees its extent (first commit wins). Any failed
// check drops the reservation and frees its extent, so a failed put returns
// every byte it took. Outcomes of finished reservations are remembered for a
// while (bounded) so a repeated commit gets the same answer and a late write
// can be told "expired" rather than "unknown". Put does the three in one
// call for a page whose bytes the caller has at hand or streams in order.
// The outcomes (ReserveStatus, CommitStatus, PutResult) are the store's own;
// the server maps them to its wire values.
//
// # Leases and pins (docs/design.md §4.4)
//
// Every entry has a pin count. A lease pins the entries of the hit prefix it
// covers until it is released or expires; a Read pins each page for the time
// its bytes are being copied out. A pinned entry is never chosen for eviction.
// An entry removed from the index while pinned (Delete) is marked dead and
// its extent is freed by whoever drops the last pin. Lookups without a lease
// touch recency only; they never extend a lease.
//
// # Locks
//
// s.mu guards the lifecycle state: the recency list, pins, reservations,
// leases and byte accounting. Each index shard has its own RWMutex guarding
// its table (table.go). The order is s.mu, then a shard lock. A lookup
// without a lease answers from shard read locks alone; what it changes
// under s.mu (the frequency histories, hit counts, the queues' order) it
// leaves to the applier goroutine when that is idle, else does under s.mu
// itself, or, when another lookup is already doing its own, sheds (the
// policy samples lookups under contention); every section under s.mu
// applies what the applier has not yet (lock, hitlog.go). A lookup with a
// lease takes s.mu once.
// Byte copies (Write, Read, checksums) run with no store lock held. Tier I/O that makes room
// (creating an SSD slot file, syncing freed headers) never runs under
// s.mu: a tier that does it in the background (tiers.Waiter) answers
// ErrPending, and Reserve and the mover wait for it with s.mu released
// (waitRoom), then try again.
//
// # Graceful stop
//
// DemoteAll (drain.go) copies the volatile tiers' pages into the durable
// one, most valuable first, so that a planned restart keeps them.
//
// # Reclamation
//
// When the tier has no room for a reservation, the least recently used
// unpinned pages are dropped until the allocation succeeds (the eviction
// package replaces this policy).
//
// # Memory
//
// A published page costs the store's heap 236 bytes at 1M pages of prefix
// chains (BenchmarkIndexBytesPerPage, which breaks the figure down;
// docs/design.md §4.2: the budget of ~128 is not met): its entry, 128 (a Go size
// class: the links to its parent and children are 4-byte refs, kids.go);
// its share of the index tables, 9-byte slots at a load factor of 3/8 to
// 3/4 (19 at 1M); its tier queue's state, 40 (the queue asks the store
// for a page's key, namespace and size: eviction.Config.Ident); the
// handle-to-entry tables, 8; and the tier's frequency history and ghost
// list, 17 and 24, sized by the tier's capacity in pages (the history
// at EvictionTuning.History keys a page, 8 by default: 2 bytes a key). A
// page that may be evicted now (a leaf, unpinned) also has a queue heap
// slot, 16 to 20 (BenchmarkIndexBytesLeaves: 254), and a page whose
// parent is not resident here a waiter, 59 at 1M of them
// (BenchmarkIndexBytesRemoteParents).
//
// # Orphans
//
// A page whose ancestor was dropped on another node is dropped as soon as
// the parent-gone notice arrives (ParentsGone), after its resident
// descendants, unless it is pinned or was just put; pages a cluster lookup
// found past a miss are only marked, evicted first (MarkOrphans; see
// orphans.go).
package store

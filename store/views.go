package store

// The store's surface, one view per caller (doc.go, "Surface"). A view is
// the Store seen by one caller: a value holding the store, free to copy,
// whose methods are that caller's operations. Store itself keeps its
// lifecycle and the namespaces every caller shares.

// Reader is the read side a server serves: lookups and their leases, the
// reads of page bytes (Read) or of where they lie in a mapped arena
// (Extents), and the lookups a cluster client takes back (TakeBackLookup,
// Uncount, MarkOrphans).
type Reader struct{ s *Store }

// Publisher is the write side a server serves: publication, in two phases
// (Reserve, Write, Commit, Abort, Outcome) or in one call (Put,
// PutInPlace, and into granted slots: Grant, PutGranted, DirectWrite), and
// deletion.
type Publisher struct{ s *Store }

// Admin is what the operator and the node's metrics ask: the namespaces,
// their keys and statistics, the store's and each tenant's usage, the
// leases, and what they change (DropNamespace, SetTTL, SetQuotas).
type Admin struct{ s *Store }

// Evictor is the eviction's cross-node driver (eviction/coord, the
// Cluster service's hints): the per-tier summaries it gossips, the cutoffs
// it sets, and the remote-child hints the nodes exchange.
type Evictor struct{ s *Store }

// Handoff is what the hinted handoff (peer) needs besides reading: which
// tiers are durable, and removing pages handed to their owner.
type Handoff struct{ s *Store }

// Reader is the store's read side.
func (s *Store) Reader() Reader { return Reader{s} }

// Publisher is the store's write side.
func (s *Store) Publisher() Publisher { return Publisher{s} }

// Admin is the store's operator side.
func (s *Store) Admin() Admin { return Admin{s} }

// Evictor is the store's side for the cross-node eviction driver.
func (s *Store) Evictor() Evictor { return Evictor{s} }

// Handoff is the store's side for the hinted handoff.
func (s *Store) Handoff() Handoff { return Handoff{s} }

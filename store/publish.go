package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// PageSpec describes a page a writer wants to publish.
type PageSpec struct {
	Key       namespace.Key
	Parent    namespace.Key // meaningful when HasParent
	HasParent bool
	Depth     uint32 // page index within its token sequence
	Size      int64
	CostHint  float64 // measured recompute cost, FLOPs; 0 = derive
	// ChainDepth is the depth of the deepest page of this page's sequence
	// published by the same put (on this node or others); 0 or not above
	// Depth: none. The page is admitted and kept at least as a fresh page
	// at that depth would be (eviction.Page.ChainCost).
	ChainDepth uint32
	// Info is what the put carries for the KV event stream alone (events.go);
	// nil none. The store keeps none of it.
	Info *PutInfo
}

// ReserveStatus is the answer to one page of a Reserve. The values are the
// store's own; the server maps them to its wire enums (server/statuses.go).
type ReserveStatus uint8

// Reserve outcomes.
const (
	Reserved ReserveStatus = iota + 1 // space set aside; write then commit
	Exists                            // already published; nothing to do
	Rejected                          // see Reservation.Err
)

// Reservation is the outcome of reserving one page.
type Reservation struct {
	Status   ReserveStatus
	WriteID  uint64
	Deadline time.Time
	Err      error // why, when Rejected
}

// CommitStatus is the outcome of committing one reservation.
type CommitStatus uint8

// Commit outcomes. Every outcome but CommitCommitted leaves the page
// unpublished by this writer and its reserved space returned. The values
// are the store's own; the server maps them to its wire enums
// (server/statuses.go).
const (
	CommitCommitted        CommitStatus = iota + 1 // published (also for a repeated commit)
	CommitExists                                   // another writer published the key first
	CommitChecksumMismatch                         // the bytes do not match the checksum
	CommitSizeMismatch                             // declared size differs from the reservation
	CommitIncomplete                               // fewer bytes were written than reserved
	CommitUnknownWrite                             // the write id was never issued or is forgotten
	CommitExpired                                  // the reservation's deadline passed
	CommitAborted                                  // the reservation was aborted
	CommitFailed                                   // the tier failed to make the page durable
	numCommitStatus
)

var commitNames = [...]string{
	CommitCommitted: "committed", CommitExists: "exists",
	CommitChecksumMismatch: "checksum mismatch", CommitSizeMismatch: "size mismatch",
	CommitIncomplete: "incomplete", CommitUnknownWrite: "unknown write",
	CommitExpired: "expired", CommitAborted: "aborted", CommitFailed: "storage failure",
}

func (c CommitStatus) String() string {
	if int(c) < len(commitNames) && commitNames[c] != "" {
		return commitNames[c]
	}
	return fmt.Sprintf("CommitStatus(%d)", c)
}

// reservation is space set aside for one page until commit, abort or
// deadline.
type reservation struct {
	ns       *nsState
	spec     PageSpec
	tier     int
	ext      tiers.Extent
	deadline time.Time

	// Guarded by Store.mu.
	committing bool
	done       chan struct{} // closed when committing ends
	outcome    CommitStatus

	// slot: a granted slot (slots.go), whose spec holds only its size
	// until PutGranted binds a page to it; Commit, Write and DirectWrite
	// do not know it. Guarded by Store.mu.
	slot bool

	// mu serialises writes and guards closed and written; taken after
	// Store.mu when both are needed.
	mu      sync.Mutex
	closed  bool
	written int64 // contiguous bytes from offset 0
	// filling counts the in-place writes (WriteInPlace) putting bytes
	// into the extent now; freeLater: the reservation ended during one,
	// and the last to end frees the extent (fill.go).
	filling   int
	freeLater bool
	// sum is the CRC-32C of bytes [0, summed), computed as in-place
	// writes put them into a mapped tier (endFill), so that Commit need
	// not read them again; summed -1: bytes were written some other way.
	sum    uint32
	summed int64
}

// Reserve sets aside space for each page not yet published. ttl 0 means the
// configured default; it is capped at Config.MaxReserveTTL.
func (pub Publisher) Reserve(id namespace.ID, pages []PageSpec, ttl time.Duration) ([]Reservation, error) {
	s := pub.s
	n, err := s.namespace(id)
	if err != nil {
		return nil, err
	}
	ttl = clampTTL(ttl, s.cfg.ReserveTTL, s.cfg.MaxReserveTTL)
	deadline := time.Now().Add(ttl)
	out := make([]Reservation, len(pages))
	s.lock()
	defer s.unlock()
	var refused map[namespace.Key]bool // pages not admitted: their children could never be hit
	for i, p := range pages {
		if p.HasParent && refused[p.Parent] {
			n.rejected.Add(1)
			refused[p.Key] = true
			out[i] = Reservation{Status: Rejected, Err: fmt.Errorf("page %x: parent not admitted: %w", p.Key[:6], ErrNotAdmitted)}
			continue
		}
		if p.Size != n.PageBytes {
			n.rejected.Add(1)
			out[i] = Reservation{Status: Rejected, Err: fmt.Errorf("page %x: size %d, namespace pages are %d bytes: %w", p.Key[:6], p.Size, n.PageBytes, ErrBadSize)}
			continue
		}
		if s.putAgainLocked(n, p.Key) {
			out[i] = Reservation{Status: Exists}
			continue
		}
		if err := s.reserveQuotaLocked(n.Tenant, p.Size); err != nil {
			n.rejected.Add(1)
			out[i] = Reservation{Status: Rejected, Err: fmt.Errorf("page %x: %w", p.Key[:6], err)}
			continue
		}
		tier, ext, err := s.allocLocked(n, p)
		for try := 0; err != nil && errors.Is(err, tiers.ErrPending) && try < maxRoomWaits; try++ {
			// A tier is making room with I/O of its own: wait for it
			// without the index lock, then try again.
			s.unlock()
			waitRoom(s.cfg.Tiers, p.Size)
			s.lock()
			tier, ext, err = s.allocLocked(n, p)
		}
		if err != nil {
			if errors.Is(err, ErrNotAdmitted) {
				if refused == nil {
					refused = make(map[namespace.Key]bool)
				}
				refused[p.Key] = true
			}
			n.rejected.Add(1)
			out[i] = Reservation{Status: Rejected, Err: fmt.Errorf("page %x: %w", p.Key[:6], err)}
			continue
		}
		wid := s.newIDLocked()
		s.reservations[wid] = &reservation{ns: n, spec: p, tier: tier, ext: ext, deadline: deadline}
		s.reservedLocked(n.Tenant, tier, p.Size, ext, +1)
		out[i] = Reservation{Status: Reserved, WriteID: wid, Deadline: deadline}
	}
	return out, nil
}

// putAgainLocked reports whether key is published, and if so records that
// it was put again: its sequence was recomputed up to it, so the parent is
// coming, if it was missing (MarkOrphans), and a notice about the missing
// parent still in flight must not drop it (Config.OrphanGrace).
func (s *Store) putAgainLocked(n *nsState, key namespace.Key) bool {
	e := n.shard(key).get(key)
	if e == nil {
		return false
	}
	if q := s.policy.pol[e.tier]; !e.dead && q.Orphan(e.h) {
		q.SetOrphan(e.h, false)
	}
	e.put = s.clock(time.Now())
	return true
}

// Write copies p into the reservation at off. Writes must not leave gaps:
// off may not exceed the bytes already written (rewriting is allowed).
func (pub Publisher) Write(id namespace.ID, writeID uint64, off int64, p []byte) error {
	s := pub.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return err
	}
	r, err := s.openReservationLocked(n, writeID)
	s.unlock()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	end := off + int64(len(p))
	if err := r.writable(writeID, off, end); err != nil {
		return err
	}
	if err := s.cfg.Tiers[r.tier].WriteAt(r.ext, p, off); err != nil {
		return fmt.Errorf("write %d to %s: %w", writeID, s.cfg.Tiers[r.tier].Kind(), err)
	}
	if len(p) > 0 {
		r.summed = -1 // Commit reads the tier's bytes back
	}
	r.written = max(r.written, end)
	return nil
}

// openReservationLocked finds a reservation that can still take writes.
func (s *Store) openReservationLocked(n *nsState, writeID uint64) (*reservation, error) {
	r := s.reservations[writeID]
	if r == nil || r.ns != n || r.slot {
		switch st, ok := s.rememberedLocked(n, writeID); {
		case !ok || r != nil:
			return nil, fmt.Errorf("write %d: %w", writeID, ErrUnknownWrite)
		case st == CommitExpired:
			return nil, fmt.Errorf("write %d: %w", writeID, ErrWriteExpired)
		default:
			return nil, fmt.Errorf("write %d (%s): %w", writeID, st, ErrWriteClosed)
		}
	}
	if r.committing {
		return nil, fmt.Errorf("write %d: %w", writeID, ErrWriteClosed)
	}
	if time.Now().After(r.deadline) {
		s.dropReservationLocked(writeID, r, CommitExpired)
		return nil, fmt.Errorf("write %d: %w", writeID, ErrWriteExpired)
	}
	return r, nil
}

// Commit verifies a reservation's bytes against size and checksum and
// publishes the page. A repeated commit of the same write id in the same
// namespace answers what the first one did (outcomes.go).
func (pub Publisher) Commit(id namespace.ID, writeID uint64, size int64, sum []byte) (CommitStatus, error) {
	s := pub.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return 0, err
	}
	r := s.reservations[writeID]
	if r == nil || r.ns != n || r.slot {
		st, ok := s.rememberedLocked(n, writeID)
		s.unlock()
		if !ok || r != nil {
			return CommitUnknownWrite, nil
		}
		return st, nil
	}
	if r.committing {
		s.unlock()
		<-r.done
		return r.outcome, nil
	}
	if time.Now().After(r.deadline) {
		s.dropReservationLocked(writeID, r, CommitExpired)
		s.unlock()
		return CommitExpired, nil
	}
	r.committing = true
	r.done = make(chan struct{})
	s.unlock()
	return s.finishCommit(writeID, r, size, sum), nil
}

// finishCommit verifies, seals and publishes reservation writeID, which
// the caller marked committing (without Store.mu), and ends it.
func (s *Store) finishCommit(writeID uint64, r *reservation, size int64, sum []byte) CommitStatus {
	st := s.verify(r, size, sum)
	if st == CommitCommitted {
		st = s.seal(r, sum)
	}

	s.lock()
	defer s.unlock()
	delete(s.reservations, writeID)
	s.reservedLocked(r.ns.Tenant, r.tier, r.spec.Size, r.ext, -1)
	if st == CommitCommitted && !s.publishLocked(r, sum) {
		st = CommitExists
	}
	if st != CommitCommitted {
		s.freeReservedLocked(r)
	}
	r.outcome = st
	r.ns.outcomes[st].Add(1)
	s.rememberLocked(writeID, r, st)
	close(r.done)
	return st
}

// PutResult is the outcome of a one-call Put.
type PutResult struct {
	// Reserve is the page's reserve outcome; the page was written and
	// committed only when it is Reserved.
	Reserve ReserveStatus
	// Commit is the commit outcome when Reserve is Reserved: CommitAborted
	// when fill failed.
	Commit CommitStatus
	// Err says why, for a rejected page (Reservation.Err) or a failed fill.
	Err error
}

// Committed reports whether the put published the page.
func (r PutResult) Committed() bool { return r.Reserve == Reserved && r.Commit == CommitCommitted }

// Put publishes one page in one call: it reserves the page (ttl as for
// Reserve), lets fill write its bytes in order through write (each call
// appends to what was written), then verifies size and checksum and
// commits, with the checks and outcomes of Reserve, Write and Commit. A
// page that is already published or refused is answered so (Reserve
// Exists or Rejected) without calling fill. When fill returns an error
// (its own, or the first of write's), the reservation is aborted and the
// error returned with the result (Commit CommitAborted); a fill that
// returns early writes fewer bytes than the page's, which commits as
// CommitIncomplete. The other errors are Reserve's (unknown namespace,
// closed store), with a zero result.
func (pub Publisher) Put(id namespace.ID, spec PageSpec, sum []byte, ttl time.Duration, fill func(write func(p []byte) error) error) (PutResult, error) {
	return pub.put(id, spec, sum, ttl, func(writeID uint64) error {
		var off int64
		return fill(func(p []byte) error {
			if err := pub.Write(id, writeID, off, p); err != nil {
				return err
			}
			off += int64(len(p))
			return nil
		})
	})
}

// PutInPlace is Put whose fill writes the page's bytes into dst (every
// byte of it: Commit checks them): the reservation's own memory when its
// tier is mapped, so the bytes are copied once, from the writer's source
// (a socket) into the tier; else a buffer the store then writes
// (WriteInPlace).
func (pub Publisher) PutInPlace(id namespace.ID, spec PageSpec, sum []byte, ttl time.Duration, fill func(dst []byte) error) (PutResult, error) {
	return pub.put(id, spec, sum, ttl, func(writeID uint64) error {
		return pub.WriteInPlace(id, writeID, 0, int(spec.Size), fill)
	})
}

// put is Put and PutInPlace: fill writes reservation writeID.
func (pub Publisher) put(id namespace.ID, spec PageSpec, sum []byte, ttl time.Duration, fill func(writeID uint64) error) (PutResult, error) {
	res, err := pub.Reserve(id, []PageSpec{spec}, ttl)
	if err != nil {
		return PutResult{}, err
	}
	r := res[0]
	if r.Status != Reserved {
		return PutResult{Reserve: r.Status, Err: r.Err}, nil
	}
	if err := fill(r.WriteID); err != nil {
		_, _ = pub.Abort(id, []uint64{r.WriteID})
		return PutResult{Reserve: Reserved, Commit: CommitAborted, Err: err}, err
	}
	st, err := pub.Commit(id, r.WriteID, spec.Size, sum)
	if err != nil {
		return PutResult{}, err
	}
	return PutResult{Reserve: Reserved, Commit: st}, nil
}

// verify closes the reservation to writes and checks size, completeness and
// checksum. It runs without Store.mu: checksumming a page takes microseconds
// to milliseconds.
func (s *Store) verify(r *reservation, size int64, sum []byte) CommitStatus {
	r.mu.Lock()
	r.closed = true
	written, filling, crc, summed := r.written, r.filling, r.sum, r.summed
	r.mu.Unlock()
	switch {
	case size != r.spec.Size:
		return CommitSizeMismatch
	case written < r.spec.Size || filling > 0: // bytes still arriving are not the page's yet
		return CommitIncomplete
	case summed == size && r.ns.Checksum == namespace.CRC32C:
		// Summed as they were put in place, by this node; nothing else
		// writes a reservation's extent.
		if len(sum) != 4 || binary.BigEndian.Uint32(sum) != crc {
			return CommitChecksumMismatch
		}
		return CommitCommitted
	}
	data, err := s.pageBytes(r.tier, r.ext, nil)
	if err != nil {
		s.log.Error("reading reserved page for checksum", "key", r.spec.Key.String(), "err", err)
		return CommitChecksumMismatch
	}
	if !bytes.Equal(r.ns.Checksum.Sum(data), sum) {
		return CommitChecksumMismatch
	}
	return CommitCommitted
}

// seal makes a verified page durable on tiers that keep pages across
// restarts, before it becomes visible.
func (s *Store) seal(r *reservation, sum []byte) CommitStatus {
	d, ok := s.cfg.Tiers[r.tier].(tiers.Durable)
	if !ok {
		return CommitCommitted
	}
	p := r.spec
	meta := tiers.PageMeta{Namespace: r.ns.ID, Key: p.Key, Parent: p.Parent, HasParent: p.HasParent,
		Depth: p.Depth, Len: p.Size, ChecksumAlg: uint8(r.ns.Checksum), Checksum: sum, Created: time.Now(),
		Cost: costHint(p.CostHint)}
	if err := d.Seal(r.ext, meta); err != nil {
		s.log.Error("sealing page", "key", p.Key.String(), "tier", d.Kind(), "err", err)
		return CommitFailed
	}
	return CommitCommitted
}

// pageBytes returns an extent's bytes: a view for mapped tiers, otherwise a
// copy into buf (grown as needed).
func (s *Store) pageBytes(tier int, ext tiers.Extent, buf []byte) ([]byte, error) {
	t := s.cfg.Tiers[tier]
	if m, ok := t.(tiers.Mapped); ok {
		return m.Bytes(ext), nil
	}
	if int64(cap(buf)) < ext.Len {
		buf = make([]byte, ext.Len)
	}
	buf = buf[:ext.Len]
	if err := t.ReadAt(ext, buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

// publishLocked inserts a verified page, whose checksum is sum, into the
// index. It reports false
// when the key is already published (first commit wins).
func (s *Store) publishLocked(r *reservation, sum []byte) bool {
	p, now := r.spec, s.clock(time.Now())
	e := newEntry(r.ns, p.Key, r.ext)
	e.depth, e.tier, e.create, e.access, e.cost = p.Depth, uint8(r.tier), now, now, costHint(p.CostHint)
	if !s.insertLocked(e, p.Parent, p.HasParent, sum, p.ChainDepth) {
		return false
	}
	s.storedLocked(e, p.Parent, p.HasParent, p.Info)
	return true
}

// costHint is a writer's cost hint as an entry keeps it: 0 for none or
// one that is not a positive finite number of FLOPs.
func costHint(c float64) float32 {
	if !(c > 0) || c > math.MaxFloat32 {
		return 0
	}
	return float32(c)
}

// insertLocked records e, whose checksum is sum (4 bytes of CRC-32C or 32
// of SHA-256) and whose parent is parent if hasParent, in the index, its
// tier's policy and the counters; chain is the depth of its deepest
// descendant published with it (0 none). It reports false, changing
// nothing, when the key is already there.
func (s *Store) insertLocked(e *entry, parent namespace.Key, hasParent bool, sum []byte, chain uint32) bool {
	n := e.ns
	e.put = e.create
	// e is no one else's until inserted: its checksum is set before the
	// shard's lock is taken, so that a sum of the wrong length (a caller's
	// bug: verify refuses one) panics without leaving the shard locked,
	// and a test fails instead of hanging on it.
	e.setChecksum(sum)
	sh := n.shard(e.key)
	sh.mu.Lock()
	if sh.m.get(e.key) != nil {
		sh.mu.Unlock()
		return false
	}
	sh.m.insert(e)
	sh.mu.Unlock()
	n.tierPages[e.tier].Add(1)
	s.parentArrivedLocked(e)
	s.attachLocked(e, parent, hasParent)
	s.childLocked(e, int(e.tier), +1)
	s.trackLocked(e, 0, chain, 0, false)
	s.adoptLocked(e)
	s.linkLocked(e)
	s.remoteArrivedLocked(e)
	s.passWorthLocked(e)
	s.pages++
	s.bytes += e.size()
	s.usageLocked(n.Tenant).Bytes += e.size()
	n.pages.Add(1)
	n.bytes.Add(e.size())
	return true
}

// Abort drops reservations before commit and returns how many it dropped.
func (pub Publisher) Abort(id namespace.ID, writeIDs []uint64) (int, error) {
	s := pub.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return 0, err
	}
	defer s.unlock()
	aborted := 0
	for _, wid := range writeIDs {
		if r := s.reservations[wid]; r != nil && r.ns == n && !r.committing {
			s.dropReservationLocked(wid, r, CommitAborted)
			aborted++
		}
	}
	return aborted, nil
}

// dropReservationLocked ends a reservation that is not committing: closes
// it to writes (waiting for an in-flight write), frees its extent (or
// leaves that to an in-place write still filling it: fill.go) and
// remembers why.
func (s *Store) dropReservationLocked(wid uint64, r *reservation, why CommitStatus) {
	if r.committing {
		return
	}
	delete(s.reservations, wid)
	s.reservedLocked(r.ns.Tenant, r.tier, r.spec.Size, r.ext, -1)
	s.freeReservedLocked(r)
	r.ns.outcomes[why].Add(1)
	s.rememberLocked(wid, r, why)
}

// allocLocked finds room for size bytes in the first tier that has it. A
// page that lands below the first tier wakes the mover, which demotes the
// first tiers' least recently used pages to make room there again. When no
// tier has room, the least recently used unpinned page of the last full
// tier that has one is dropped (pages are demoted before they are
// dropped), and the allocation is tried again. Before the first drop the
// policy must admit the page (admitLocked): a page worth less than what it
// would displace, or under the cutoff, is ErrNotAdmitted. A tier that is
// making room in the background (tiers.Waiter answering ErrPending) makes
// the allocation fail with ErrPending before anything is dropped: the
// caller waits (waitRoom) without s.mu and tries again. No tier I/O that
// makes room (creating files, syncing) runs here: a Waiter does it in its
// own goroutine. The tiers in which the namespace's tenant holds its
// reservation share (quota.go) are passed over, neither allocated in nor
// evicted from; when that is every tier the error wraps ErrQuota.
func (s *Store) allocLocked(n *nsState, spec PageSpec) (int, tiers.Extent, error) {
	size, admitted := spec.Size, false
	var over [MaxTiers]bool // the tenant's share of the tier has no room for the page
	for {
		var errs []error
		var full [MaxTiers]bool
		anyFull, pending, inShare := false, false, false
		for i, t := range s.cfg.Tiers {
			if over[i] {
				continue
			}
			ext, capped, err := s.allocInShareLocked(n, i, size)
			if capped {
				over[i] = true
				continue
			}
			inShare = true
			if err == nil {
				if i > 0 {
					s.wakeMover(i)
				}
				return i, ext, nil
			}
			// A tier that cannot take the page (full, too large, failing)
			// passes it to the next one.
			full[i] = errors.Is(err, tiers.ErrFull)
			anyFull = anyFull || full[i]
			pending = pending || errors.Is(err, tiers.ErrPending)
			errs = append(errs, fmt.Errorf("%s: %w", t.Kind(), err))
		}
		if !inShare {
			return 0, tiers.Extent{}, s.shareErrLocked(n.Tenant)
		}
		lastErr := errors.Join(errs...)
		if pending {
			return 0, tiers.Extent{}, lastErr
		}
		if !anyFull {
			return 0, tiers.Extent{}, lastErr
		}
		if !admitted {
			if !s.admitLocked(n, spec) {
				return 0, tiers.Extent{}, ErrNotAdmitted
			}
			admitted = true
		}
		victim := s.dropCandidateLocked(full)
		if victim == nil {
			return 0, tiers.Extent{}, fmt.Errorf("%w: %w", ErrNoSpace, lastErr)
		}
		s.evictLocked(victim)
	}
}

// maxRoomWaits bounds how often one allocation waits for a tier making
// room (each wait is bounded by the tier: 100 ms for the SSD tier).
const maxRoomWaits = 50

// tryAlloc allocates in t without waiting for its background I/O.
func tryAlloc(t tiers.Tier, size int64) (tiers.Extent, error) {
	if w, ok := t.(tiers.Waiter); ok {
		return w.TryAlloc(size)
	}
	return t.Alloc(size)
}

// waitRoom waits for the tiers that make room in the background; it is
// called without s.mu.
func waitRoom(ts []tiers.Tier, size int64) {
	for _, t := range ts {
		if w, ok := t.(tiers.Waiter); ok {
			w.WaitRoom(size)
		}
	}
}

// evictLocked drops a page to make room.
func (s *Store) evictLocked(e *entry) {
	if s.policy.observeDrop != nil {
		s.policy.observeDrop(e)
	}
	s.removeLocked(e, true)
	s.evictions.Add(1)
	e.ns.evicted.Add(1)
}

// dropCandidateLocked is the policy's victim in the lowest full tier that
// has one: dropping a page of a tier that is not full (one failing writes)
// would make no room.
func (s *Store) dropCandidateLocked(full [MaxTiers]bool) *entry {
	for i := len(s.policy.pol) - 1; i >= 0; i-- {
		if !full[i] {
			continue
		}
		if v := s.dropVictimLocked(i); v != nil {
			return v
		}
	}
	return nil
}

// removeLocked takes an entry out of the index and marks it dead, so that
// holders of the pointer (a lookup or read that found it before taking
// Store.mu) treat it as a miss. Its extent is freed now, or by the last
// unpin. A page with remote children sends a parent-gone notice.
func (s *Store) removeLocked(e *entry, evicted bool) {
	sh := e.ns.shard(e.key)
	sh.mu.Lock()
	sh.m.delete(e.key)
	sh.mu.Unlock()
	s.removedLocked(e)
	s.goneLocked(e)
	s.unlinkLocked(e)
	s.untrackLocked(e, evicted)
	e.ns.tierPages[e.tier].Add(-1)
	s.childLocked(e, int(e.tier), -1)
	s.detachLocked(e)
	s.parentLeftLocked(e)
	size := e.size()
	s.pages--
	s.bytes -= size
	s.usageLocked(e.ns.Tenant).Bytes -= size
	e.ns.pages.Add(-1)
	e.ns.bytes.Add(-size)
	e.dead = true
	if e.pins == 0 {
		s.cfg.Tiers[e.tier].Free(e.extent())
	} else if r, ok := s.cfg.Tiers[e.tier].(tiers.Retirer); ok {
		// Its memory stays for the pins; every cached location of it
		// (same-host clients') must fail its generation check now.
		e.setExtent(r.Retire(e.extent()))
	}
}

func clampTTL(ttl, def, limit time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = def
	}
	return min(ttl, limit)
}

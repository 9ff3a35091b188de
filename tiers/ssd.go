package tiers

// SSD: the local-disk tier, whose pages survive a restart.
//
// # Files
//
// Pages live in a few large pre-allocated slot files per size class
// (Dir/class-<slot size>-<file id>.slots), never a file per page. A file is
// a file header, a region of packed 256-byte slot headers and the slots'
// payloads, each 4 KiB-aligned (byte layout: ssd_format.go). Size classes are
// the host tier's (host_classes.go): one file holds one class. Capacity is
// shared between classes on demand, a file at a time: a class with no free
// slot creates a file of FileSize bytes (less if less capacity is left, and
// only as long as the class's slots need), fallocate'd so that writes into
// it cannot fail for lack of space. When capacity is exhausted a class
// takes an empty file of another class (one whose pages have all been
// freed): the file is removed and a new one created. Files are the unit that
// moves between classes, as slabs are in the host tier; a half-empty file
// stays with its class. A new file is written under a .tmp name, synced,
// renamed and its directory synced, so a crash never leaves a half-made
// file under a real name (open removes stray .tmp files).
//
// # Writing a page
//
// Alloc takes a free slot in memory and writes its header in state RSRV (no
// sync; it only lets recovery count torn writes). WriteAt is pwrite into the
// payload. Seal, called once the store has verified the page's checksum,
// makes the page durable and visible to recovery; under SyncEveryPage:
//
//  1. fdatasync the file: the payload is on disk;
//  2. write the header: the page's meta, the generation and the commit
//     marker SEAL, with the header's CRC;
//  3. fdatasync again: the header is on disk; Seal returns.
//
// A crash before 2 leaves a header without SEAL: never recovered. A crash
// during 2 or 3 leaves either the old header, or the new one complete, or a
// torn one whose CRC fails (dropped at recovery): the page is lost or
// recovered whole, never partial, because the payload the header points at
// was durable before the header was written. (A crash after 3 but before
// Seal returns recovers a page the caller was not told about: it verifies,
// so it is still the right page.) Independently of the order, recovery
// verifies every payload against the header's checksum, so even a reordered
// or lost write (SyncNone and a power loss, a disk that lies about flushes)
// costs a page, never serves wrong bytes.
//
// Free writes the header back in state FREE and, for a sealed page under
// SyncEveryPage, fdatasyncs before the slot is reused, so a deleted page
// never reappears after a restart. Under SyncBatch and SyncNone a power loss
// between Free and the next sync can bring a freed page back: its bytes
// still verify, so it is the right page, only one the store had dropped (it
// drops it again, or serves a page that is still correct). A reused slot's
// old header never describes new bytes: Alloc's RSRV header write must
// succeed before Alloc returns, so it overwrites whatever the header said
// before any new payload byte is written (and if a power loss loses that
// write, the old header no longer matches the payload's checksum).

// # Sync modes
//
// See SyncMode: SyncEveryPage (default), SyncBatch (group commit: the same
// guarantee, amortised over concurrent Seals) and SyncNone (survives a
// process crash, not a power loss).
//
// # Recovery
//
// Until Recover has run, Alloc fails with ErrNotRecovered. Recover
// (ssd_recover.go) scans every slot header and verifies every sealed
// payload before the tier serves: see its design comment.
//
// # Capacity changes
//
// On open, slot files are adopted in id order (oldest first) while their
// lengths fit Capacity; a file that does not fit is not adopted, and Recover
// removes it, logging how many sealed pages it held. So a restart with a
// smaller Capacity keeps the pages of the files that fit, and one with a
// larger Capacity keeps everything and grows new files as needed. Files
// keep the geometry they were created with; FileSize applies to new files.
//
// # Locking
//
// One mutex per class guards the class's file list and its files' slot
// tables (generation, state, free stack). growMu serialises creating and
// removing files; poolMu guards the list of all files and the bytes they
// take. Order: growMu, then a class mutex, then poolMu. All file I/O runs
// outside the class mutexes and poolMu; Alloc's only I/O under growMu is
// growth. Usage counters are atomics.

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// In-memory slot states.
const (
	ssdSlotFree     uint8 = iota
	ssdSlotReserved       // allocated, being written: WriteAt and Seal allowed
	ssdSlotSealing        // a Seal is running
	ssdSlotSealed         // sealed: read-only until freed
	ssdSlotFreeing        // a Free is clearing the header
	ssdSlotBad            // quarantined after an I/O error: never reused
)

// ssdClass is one size class: the files holding its slots.
type ssdClass struct {
	size int64 // slot size; fixed

	// mu guards the fields below and the slot tables (gens, state, free,
	// live) of every file in files.
	mu        sync.Mutex
	files     []*ssdFile // sorted by id
	extents   int64      // live extents
	requested int64      // sum of their Len
	// growing says a file for the class is being created (by the worker,
	// or inline by a grow); growFailed and growErr record the last failure
	// (ssd_health.go); pendingFrees counts the class's slots whose Free the
	// worker has queued (ssd_worker.go).
	growing      bool
	growFailed   time.Time
	growErr      error
	pendingFrees int
}

// ssdFile is one open slot file.
type ssdFile struct {
	f        File
	path     string
	id       uint32
	class    int
	slotSize int64
	slots    int32
	dataOff  int64
	length   int64
	// found is the file's length when it was opened: bytes past it were
	// lost (truncation) and read back as zeros.
	found int64
	// dirty says the file has writes that SyncBatch's next round must sync.
	dirty atomic.Bool
	// closeMu orders the batcher's syncs (read side) before the close of a
	// file reclaim removes (write side): a file whose pages all went can
	// still be on the batcher's dirty list. closed is guarded by closeMu.
	closeMu sync.RWMutex
	closed  bool

	// Slot tables, guarded by the class's mu: the generation of each
	// slot's extent (0 while free), its state (ssdSlot*), the stack of free
	// slots, the count of slots allocated (not free or bad), and the live
	// slots that saw an I/O error and go bad when freed.
	gens     []uint64
	state    []uint8
	free     []int32
	live     int32
	poisoned map[int32]bool
}

// payloadOff returns the file offset of slot's payload.
func (f *ssdFile) payloadOff(slot int32) int64 { return f.dataOff + int64(slot)*f.slotSize }

// headerOff returns the file offset of slot's header.
func (f *ssdFile) headerOff(slot int32) int64 {
	return ssdFileHeaderSize + int64(slot)*ssdSlotHeaderSize
}

// SSD is the local-disk tier. It implements Tier and Durable (it is not
// Mapped) and is safe for concurrent use, except that Close must not run
// concurrently with other methods.
type SSD struct {
	dir      string
	capacity int64
	fileSize int64
	maxSize  int64 // largest page: the largest class one FileSize file holds
	mode     SyncMode
	workers  int
	fs       FS
	log      *slog.Logger
	classes  []ssdClass  // by class index
	batch    *ssdBatcher // under SyncBatch
	worker   *ssdWorker  // under SSDConfig.Background
	health   ssdHealth   // disk trouble (ssd_health.go)
	faulty   atomic.Bool // health is in a fault
	// shortFile says the last grow made a file smaller than it wanted (a
	// full file system): the disk-full fault stays. Written under growMu.
	shortFile atomic.Bool
	closed    atomic.Bool   // Close has begun
	started   atomic.Bool   // Recover has begun
	ready     atomic.Bool   // Recover has finished: Alloc may run
	gen       atomic.Uint64 // the last generation handed out
	extents   atomic.Int64
	used      atomic.Int64
	request   atomic.Int64

	// growMu serialises creating and removing files.
	growMu sync.Mutex

	// poolMu guards the fields below.
	poolMu    sync.Mutex
	files     []*ssdFile // adopted files, by id
	fileBytes int64      // sum of their lengths
	nextID    uint32
	excess    []*ssdFile // files beyond Capacity at open; Recover removes them
}

var _ Durable = (*SSD)(nil)

// NewSSD opens (creating it if need be) the slot-file directory cfg.Dir and
// returns the tier over it. It adopts the files that fit Capacity (see the
// design comment), extends truncated ones back to their length and removes
// stray temporary files. The tier allocates nothing until Recover has run.
func NewSSD(cfg SSDConfig) (*SSD, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &SSD{
		dir:      cfg.Dir,
		capacity: cfg.Capacity,
		fileSize: cfg.FileSize,
		mode:     cfg.Sync,
		workers:  cfg.RecoveryWorkers,
		fs:       cfg.FS,
		log:      cfg.Logger,
	}
	maxCls := classIndex(cfg.FileSize - 2*ssdBlock)
	if classSize(maxCls) > cfg.FileSize-2*ssdBlock {
		maxCls--
	}
	s.maxSize = classSize(maxCls)
	if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("ssd: creating %s: %w", s.dir, err)
	}
	if err := s.open(maxCls); err != nil {
		s.closeFiles()
		return nil, err
	}
	if s.mode == SyncBatch {
		s.batch = newSSDBatcher(s, cfg.BatchInterval)
	}
	if cfg.Background {
		s.worker = newSSDWorker()
		go s.runWorker()
	}
	return s, nil
}

// Kind returns KindSSD.
func (s *SSD) Kind() Kind { return KindSSD }

// Alloc sets aside a slot of the smallest class holding size bytes. It
// fails with ErrNotRecovered before Recover has run, ErrClosed after Close,
// ErrTooLarge when size <= 0 or its class does not fit one file, ErrFull
// when the class has no free slot and no file can be made for it (wrapping
// also the file system's error, such as ENOSPC, when creating a file
// failed; after such a failure the class does not try again for a second:
// ssd_health.go), and ErrFailing while the file system is read-only. With
// SSDConfig.Background it waits for the worker to make room (TryAlloc does
// not).
func (s *SSD) Alloc(size int64) (Extent, error) { return s.alloc(size, true) }

// alloc is Alloc, waiting for background I/O when wait is set, otherwise
// answering ErrPending.
func (s *SSD) alloc(size int64, wait bool) (Extent, error) {
	switch {
	case s.closed.Load():
		return Extent{}, fmt.Errorf("ssd: allocating %d bytes: %w", size, ErrClosed)
	case !s.ready.Load():
		return Extent{}, fmt.Errorf("ssd: allocating %d bytes: %w", size, ErrNotRecovered)
	case size <= 0 || size > s.maxSize:
		return Extent{}, fmt.Errorf("ssd: allocating %d bytes (largest %d): %w", size, s.maxSize, ErrTooLarge)
	}
	if s.faulty.Load() {
		if st := s.Fault(); st.Fault == FaultReadOnly {
			return Extent{}, fmt.Errorf("ssd: allocating %d bytes: file system read-only since %s: %w: %w",
				size, st.Since.Format(time.RFC3339), ErrFailing, st.Err)
		}
	}
	cls := classIndex(size)
	cl := &s.classes[cls]
	for {
		cl.mu.Lock()
		f, slot, ok := cl.takeLocked()
		if !ok {
			err := s.roomLocked(cl, cls)
			cl.mu.Unlock()
			switch {
			case errors.Is(err, ErrPending) && wait:
				s.WaitRoom(size)
				continue
			case errors.Is(err, ErrPending):
				return Extent{}, fmt.Errorf("ssd: allocating %d bytes (class %d): %w", size, cl.size, err)
			case err != nil:
				return Extent{}, fmt.Errorf("ssd: allocating %d bytes (class %d): %w", size, cl.size, err)
			}
			if err := s.growClass(cls); err != nil {
				return Extent{}, fmt.Errorf("ssd: allocating %d bytes (class %d): %w", size, cl.size, err)
			}
			continue
		}
		gen := s.gen.Add(1)
		f.gens[slot], f.state[slot] = gen, ssdSlotReserved
		cl.extents++
		cl.requested += size
		s.growAheadLocked(cl, cls)
		cl.mu.Unlock()
		s.count(1, cl.size, size)
		ext := Extent{Off: int64(f.id)<<ssdOffShift | f.payloadOff(slot), Len: size, Cap: cl.size, Gen: gen}
		h := ssdSlotHeader{State: ssdStateReserved, Slot: uint32(slot), SlotSize: f.slotSize, Gen: gen}
		if err := s.writeHeader(f, slot, &h); err != nil {
			s.noteFault("reserving a slot", err)
			s.poison(cl, f, slot, err)
			s.release(cl, f, slot, size, false)
			return Extent{}, fmt.Errorf("ssd: allocating %d bytes: writing slot %d header of %s: %w", size, slot, f.path, err)
		}
		return ext, nil
	}
}

// roomLocked decides what a class without a free slot does: ErrPending
// when room is being made (a file being created, slots being freed, or,
// with a worker, a file it is now asked for), ErrFull when, with a
// worker, the class's last attempt to grow failed less than ssdGrowRetry
// ago (inline, every Alloc tries again), nil when the caller should grow
// the class inline. cl.mu is held.
func (s *SSD) roomLocked(cl *ssdClass, cls int) error {
	switch {
	case cl.pendingFrees > 0:
		return fmt.Errorf("%d slots being freed: %w", cl.pendingFrees, ErrPending)
	case cl.growing && s.worker != nil:
		return fmt.Errorf("a slot file being created: %w", ErrPending)
	case s.worker != nil && !cl.growFailed.IsZero() && time.Since(cl.growFailed) < ssdGrowRetry:
		return fmt.Errorf("no free slot; creating a file failed %v ago: %w",
			time.Since(cl.growFailed).Round(time.Millisecond), cl.growErr)
	case s.worker != nil:
		cl.growing = true
		s.worker.wantGrow(cls)
		return fmt.Errorf("a slot file being created: %w", ErrPending)
	}
	return nil
}

// growAheadLocked asks the worker for another file for a class running
// low on free slots, while capacity is left for one. cl.mu is held.
func (s *SSD) growAheadLocked(cl *ssdClass, cls int) {
	if s.worker == nil || cl.growing || (!cl.growFailed.IsZero() && time.Since(cl.growFailed) < ssdGrowRetry) {
		return
	}
	perFile := max(1, int(s.fileSize/cl.size)/8)
	if cl.freeLocked() >= perFile || s.room() < ssdFileLength(cl.size, 1) {
		return
	}
	cl.growing = true
	s.worker.wantGrow(cls)
}

// takeLocked pops a free slot of the lowest-numbered file that has one, so
// pages gather in old files and new ones empty first.
func (cl *ssdClass) takeLocked() (*ssdFile, int32, bool) {
	for _, f := range cl.files {
		if n := len(f.free); n > 0 {
			slot := f.free[n-1]
			f.free = f.free[:n-1]
			f.live++
			return f, slot, true
		}
	}
	return nil, 0, false
}

// release returns a slot whose header is not (or no longer) committed to
// the free stack, or quarantines it if it is poisoned, and takes back the
// extent's counts. queued says the slot's Free was the worker's: its
// pendingFrees count drops in the same critical section, so that
// pendingFrees == 0 means no slot of the class is still freeing (else
// roomLocked asks for a needless file, which grow then skips, and a
// waiter on the count goes on too early).
func (s *SSD) release(cl *ssdClass, f *ssdFile, slot int32, size int64, queued bool) {
	cl.mu.Lock()
	if queued {
		cl.pendingFrees--
	}
	f.gens[slot], f.state[slot] = 0, ssdSlotFree
	bad := f.poisoned[slot]
	if bad {
		delete(f.poisoned, slot)
		f.state[slot] = ssdSlotBad
	} else {
		f.free = append(f.free, slot)
	}
	f.live--
	cl.extents--
	cl.requested -= size
	cl.mu.Unlock()
	s.count(-1, -cl.size, -size)
	if bad {
		s.log.Warn("ssd: slot quarantined after an I/O error, until its file is recycled or the tier restarts",
			"file", f.path, "slot", slot)
	}
}

// poison marks a live slot to be quarantined when freed, after an I/O error
// that may be the slot's own medium failing: without it, the free stack
// would hand the same bad slot to every Alloc of the class. A full disk
// (ENOSPC, EDQUOT) is not the slot's fault and does not poison it.
func (s *SSD) poison(cl *ssdClass, f *ssdFile, slot int32, err error) {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if f.poisoned == nil {
		f.poisoned = map[int32]bool{}
	}
	f.poisoned[slot] = true
}

func (s *SSD) count(extents, used, requested int64) {
	s.extents.Add(extents)
	s.used.Add(used)
	s.request.Add(requested)
}

// WriteAt writes p into ext at off (pwrite). ext must be allocated and not
// sealed: writing a sealed extent fails with ErrSealed, a freed one with
// ErrStale, a range outside ext.Len with ErrOutOfRange. I/O errors (ENOSPC,
// EIO) are wrapped; the extent stays allocated and may be freed. After an
// error other than a full disk the slot is quarantined when freed, so a bad
// sector is not handed out again.
func (s *SSD) WriteAt(ext Extent, p []byte, off int64) error {
	f, err := s.check(ext, off, len(p), true)
	if err == nil {
		slot := s.slotOf(f, ext)
		if _, err = f.f.WriteAt(p, f.payloadOff(slot)+off); err != nil {
			s.poison(&s.classes[f.class], f, slot, err)
		}
	}
	if err != nil {
		return fmt.Errorf("ssd: writing %d bytes at %d of extent %+v: %w", len(p), off, ext, err)
	}
	return nil
}

// ReadAt reads len(p) bytes of ext at off into p (pread). It fails with
// ErrStale when ext is not live, or stopped being live while the read ran
// (so a read never returns bytes of a page that replaced ext's), and
// ErrOutOfRange for a range outside ext.Len.
func (s *SSD) ReadAt(ext Extent, p []byte, off int64) error {
	f, err := s.check(ext, off, len(p), false)
	if err == nil {
		_, err = f.f.ReadAt(p, f.payloadOff(s.slotOf(f, ext))+off)
		if err == nil {
			_, err = s.check(ext, off, len(p), false)
		}
	}
	if err != nil {
		return fmt.Errorf("ssd: reading %d bytes at %d of extent %+v: %w", len(p), off, ext, err)
	}
	return nil
}

func (s *SSD) slotOf(f *ssdFile, ext Extent) int32 {
	return int32((ext.Off&(ssdMaxFileLen-1) - f.dataOff) / f.slotSize)
}

// check returns ext's file after checking that ext is live (and, for a
// write, not sealed) and that n bytes at off lie inside ext.Len.
func (s *SSD) check(ext Extent, off int64, n int, write bool) (*ssdFile, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if off < 0 || ext.Len < 0 || off > ext.Len-int64(n) {
		return nil, ErrOutOfRange
	}
	cl, err := s.classOf(ext)
	if err != nil {
		return nil, err
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	f, slot, err := cl.locateLocked(ext)
	if err != nil {
		return nil, err
	}
	switch st := f.state[slot]; {
	case write && (st == ssdSlotSealed || st == ssdSlotSealing):
		return nil, ErrSealed
	case st == ssdSlotFree || st == ssdSlotFreeing || st == ssdSlotBad:
		return nil, ErrStale
	}
	return f, nil
}

// classOf returns the class of an extent's Cap; ErrOutOfRange if it names
// none.
func (s *SSD) classOf(ext Extent) (*ssdClass, error) {
	if ext.Cap <= 0 || ext.Len > ext.Cap {
		return nil, ErrOutOfRange
	}
	cls := classIndex(ext.Cap)
	if cls >= len(s.classes) || classSize(cls) != ext.Cap {
		return nil, ErrOutOfRange
	}
	return &s.classes[cls], nil
}

// locateLocked returns ext's file and slot: ErrOutOfRange if ext.Off is not
// a slot of the class, ErrStale if the file is gone or the slot's
// generation is not ext.Gen.
func (cl *ssdClass) locateLocked(ext Extent) (*ssdFile, int32, error) {
	id := uint32(ext.Off >> ssdOffShift)
	i, ok := slices.BinarySearchFunc(cl.files, id, func(f *ssdFile, id uint32) int {
		return int(int64(f.id) - int64(id))
	})
	if !ok {
		return nil, 0, ErrStale
	}
	f := cl.files[i]
	pos := ext.Off&(ssdMaxFileLen-1) - f.dataOff
	if ext.Off < 0 || pos < 0 || pos%f.slotSize != 0 || pos/f.slotSize >= int64(f.slots) {
		return nil, 0, ErrOutOfRange
	}
	slot := int32(pos / f.slotSize)
	if ext.Gen == 0 || f.gens[slot] != ext.Gen {
		return nil, 0, ErrStale
	}
	return f, slot, nil
}

// transition moves ext's slot from state from to state to, returning its
// class, file and slot; ErrSealed or ErrStale when the slot is not in from.
func (s *SSD) transition(ext Extent, from, to uint8) (*ssdClass, *ssdFile, int32, error) {
	cl, err := s.classOf(ext)
	if err != nil {
		return nil, nil, 0, err
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	f, slot, err := cl.locateLocked(ext)
	if err != nil {
		return nil, nil, 0, err
	}
	switch st := f.state[slot]; {
	case st == from:
		f.state[slot] = to
		return cl, f, slot, nil
	case st == ssdSlotSealed || st == ssdSlotSealing:
		return nil, nil, 0, ErrSealed
	}
	return nil, nil, 0, ErrStale
}

// Seal makes ext's page durable with meta and marks its slot committed,
// in the order and with the guarantee its SyncMode documents. meta.Len must
// be ext.Len and meta.Checksum fit meta.ChecksumAlg (ErrInvalidMeta); Seal
// does not re-read the payload (the store verified it before, and recovery
// verifies it again). A sealed extent is read-only: WriteAt and a second
// Seal fail with ErrSealed. On an I/O error the page is not sealed, the
// error wraps the cause (errors.Is(err, syscall.ENOSPC) holds for a full
// disk), and the extent stays allocated for the caller to Free.
func (s *SSD) Seal(ext Extent, meta PageMeta) error {
	if s.closed.Load() {
		return fmt.Errorf("ssd: sealing extent %+v: %w", ext, ErrClosed)
	}
	if meta.Len != ext.Len || ssdChecksumLen(meta.ChecksumAlg) == 0 ||
		len(meta.Checksum) != ssdChecksumLen(meta.ChecksumAlg) {
		return fmt.Errorf("ssd: sealing extent %+v: length %d, checksum algorithm %d with %d bytes: %w",
			ext, meta.Len, meta.ChecksumAlg, len(meta.Checksum), ErrInvalidMeta)
	}
	cl, f, slot, err := s.transition(ext, ssdSlotReserved, ssdSlotSealing)
	if err != nil {
		return fmt.Errorf("ssd: sealing extent %+v: %w", ext, err)
	}
	h := ssdSlotHeader{State: ssdStateSealed, Slot: uint32(slot), SlotSize: f.slotSize, Gen: ext.Gen, Meta: meta}
	err = s.commit(f, slot, &h)
	next := ssdSlotSealed
	if err != nil {
		// The header may have reached the page cache or the disk; put
		// RSRV back (best effort) so that a page the caller was told is
		// not sealed is not recovered. If that fails too, the page can
		// come back after a restart: still verified, so still correct.
		next = ssdSlotReserved
		h = ssdSlotHeader{State: ssdStateReserved, Slot: uint32(slot), SlotSize: f.slotSize, Gen: ext.Gen}
		if s.writeHeader(f, slot, &h) == nil && s.mode == SyncEveryPage {
			_ = f.f.Sync()
		}
	}
	cl.mu.Lock()
	f.state[slot] = next
	cl.mu.Unlock()
	if err != nil {
		s.noteFault("sealing a page", err)
		return fmt.Errorf("ssd: sealing extent %+v in %s slot %d: %w", ext, f.path, slot, err)
	}
	s.clearFault("sealing a page", false)
	return nil
}

// commit writes a sealed header per the sync mode (see SyncMode).
func (s *SSD) commit(f *ssdFile, slot int32, h *ssdSlotHeader) error {
	switch s.mode {
	case SyncBatch:
		return s.batch.commit(f, slot, h)
	case SyncNone:
		return s.writeHeader(f, slot, h)
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("syncing the payload: %w", err)
	}
	if err := s.writeHeader(f, slot, h); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("syncing the header: %w", err)
	}
	return nil
}

// writeHeader writes slot's header (pwrite, no sync).
func (s *SSD) writeHeader(f *ssdFile, slot int32, h *ssdSlotHeader) error {
	var b [ssdSlotHeaderSize]byte
	h.encode(b[:])
	if _, err := f.f.WriteAt(b[:], f.headerOff(slot)); err != nil {
		return fmt.Errorf("writing the header: %w", err)
	}
	return nil
}

// Free clears ext's commit marker on disk (synced under SyncEveryPage if
// the page was sealed) and returns the slot for reuse. With
// SSDConfig.Background, the Free of a sealed page under SyncEveryPage is
// queued instead (ssd_worker.go): Free returns at once, the extent is no
// longer live, and the slot comes back for reuse once the worker's round
// has synced its header (Alloc waits for that; Close finishes every queued
// Free). Freeing an extent that is not live (a double free, a stale
// generation, an extent of another tier) panics: it is a programmer error.
// An I/O error is logged: the slot is reused anyway (Alloc rewrites its
// header first), and the worst a failed clear can cause is that the freed
// page, still verified, comes back after a restart. After Close, Free does
// nothing.
func (s *SSD) Free(ext Extent) {
	if s.closed.Load() {
		return
	}
	cl, f, slot, err := s.transition(ext, ssdSlotSealed, ssdSlotFreeing)
	sealed := err == nil
	if errors.Is(err, ErrStale) {
		cl, f, slot, err = s.transition(ext, ssdSlotReserved, ssdSlotFreeing)
	}
	if err != nil {
		panic(fmt.Sprintf("tiers: SSD.Free of %+v: %v (double free, stale extent, or a Seal still running)", ext, err))
	}
	if sealed && s.mode == SyncEveryPage && s.worker != nil {
		cl.mu.Lock()
		cl.pendingFrees++
		cl.mu.Unlock()
		s.worker.queueFree(ssdFreeReq{cl: cl, f: f, slot: slot, ext: ext})
		return
	}
	h := ssdSlotHeader{State: ssdStateFree, Slot: uint32(slot), SlotSize: f.slotSize, Gen: ext.Gen}
	err = s.writeHeader(f, slot, &h)
	if err == nil && sealed {
		switch s.mode {
		case SyncEveryPage:
			err = f.f.Sync()
		case SyncBatch:
			s.batch.markDirty(f)
		}
	}
	if err != nil {
		s.noteFault("clearing a freed page", err)
		s.log.Error("ssd: clearing the commit marker of a freed page failed; it may reappear after a restart",
			"file", f.path, "slot", slot, "err", err)
	}
	s.release(cl, f, slot, ext.Len, false)
}

// MaxSize returns the largest page the tier accepts: the largest class one
// file of FileSize bytes holds.
func (s *SSD) MaxSize() int64 { return s.maxSize }

// Close stops the group-commit goroutine, syncs and closes every file. A
// clean Close keeps every sealed page in every mode. Afterwards every
// method fails with ErrClosed, and Free does nothing. Close must not run
// concurrently with other methods; a second Close returns ErrClosed.
func (s *SSD) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("ssd: close: %w", ErrClosed)
	}
	if s.worker != nil {
		close(s.worker.stop)
		<-s.worker.done
	}
	if s.batch != nil {
		s.batch.close()
	}
	if err := s.closeFiles(); err != nil {
		return fmt.Errorf("ssd: close: %w", err)
	}
	return nil
}

// closeFiles syncs and closes every open file.
func (s *SSD) closeFiles() error {
	s.poolMu.Lock()
	files := append(slices.Clone(s.files), s.excess...)
	s.files, s.excess = nil, nil
	s.poolMu.Unlock()
	var errs []error
	for _, f := range files {
		if err := f.f.Sync(); err != nil {
			errs = append(errs, err)
		}
		if err := f.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

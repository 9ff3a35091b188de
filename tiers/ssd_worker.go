package tiers

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// Background I/O (SSDConfig.Background).
//
// A store calls Alloc and Free under its index lock, which lookups need
// too; creating a slot file (fallocate, fsync, rename, directory fsync:
// ~10 ms for 64 MiB) or syncing a freed page's header (an fdatasync) there
// stalls every lookup behind it. With Background set, one goroutine owned
// by the tier (Close stops it and waits) does that I/O instead:
//
//   - a class that has no free slot asks the worker for a file and Alloc
//     (TryAlloc) answers ErrPending at once; the caller waits outside its
//     lock (WaitRoom) and tries again. A class running low (under an
//     eighth of a new file's slots free) asks before it runs out, so a
//     steady writer rarely waits at all;
//   - Free of a sealed page under SyncEveryPage marks the slot freeing and
//     queues it; the worker writes the cleared headers of all queued slots,
//     fdatasyncs each file once (group commit of frees) and only then
//     returns the slots to the free stack. A class whose only slots are
//     being freed answers ErrPending too. The guarantee becomes SyncBatch's:
//     a page freed just before a crash may reappear after it (verified,
//     so still the right bytes); a reused slot never describes new bytes
//     with an old header (Alloc writes RSRV first, as always).
//
// The only I/O left under the caller's lock is Alloc's RSRV header pwrite
// and Free's (page-cache writes, no sync). Without Background (the default,
// and what tests of the tier alone use) Alloc grows and Free syncs inline.

// ssdWorker is the background I/O goroutine's state.
type ssdWorker struct {
	kick chan struct{} // buffered 1
	stop chan struct{} // closed by Close
	done chan struct{} // closed when run returns

	// mu guards the fields below.
	mu    sync.Mutex
	grow  map[int]bool // classes that want a file
	frees []ssdFreeReq
	sig   chan struct{} // closed, and replaced, after every round
}

// ssdFreeReq is a queued Free.
type ssdFreeReq struct {
	cl   *ssdClass
	f    *ssdFile
	slot int32
	ext  Extent
}

func newSSDWorker() *ssdWorker {
	return &ssdWorker{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		grow: map[int]bool{}, sig: make(chan struct{})}
}

func (w *ssdWorker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// signal returns the channel closed after the next round.
func (w *ssdWorker) signal() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sig
}

func (w *ssdWorker) wantGrow(cls int) {
	w.mu.Lock()
	w.grow[cls] = true
	w.mu.Unlock()
	w.poke()
}

func (w *ssdWorker) queueFree(r ssdFreeReq) {
	w.mu.Lock()
	w.frees = append(w.frees, r)
	w.mu.Unlock()
	w.poke()
}

// run is the worker goroutine: rounds until Close, then a last round of
// frees (so every Free that returned is on disk before the files close).
func (s *SSD) runWorker() {
	w := s.worker
	defer close(w.done)
	for {
		select {
		case <-w.kick:
			s.workRound(true)
		case <-w.stop:
			s.workRound(false)
			return
		}
	}
}

// workRound does the queued frees, then (when grow) the queued growth, and
// wakes the waiters. Growth not done is cancelled (the tier is closing).
func (s *SSD) workRound(grow bool) {
	w := s.worker
	w.mu.Lock()
	frees, classes := w.frees, w.grow
	w.frees, w.grow = nil, map[int]bool{}
	w.mu.Unlock()
	s.doFrees(frees)
	for cls := range classes {
		if grow {
			s.growClass(cls)
			continue
		}
		cl := &s.classes[cls]
		cl.mu.Lock()
		cl.growing = false
		cl.mu.Unlock()
	}
	w.mu.Lock()
	close(w.sig)
	w.sig = make(chan struct{})
	w.mu.Unlock()
}

// doFrees clears the queued slots' headers, syncs each file once, and
// returns the slots.
func (s *SSD) doFrees(frees []ssdFreeReq) {
	if len(frees) == 0 {
		return
	}
	var files []*ssdFile
	failed := map[*ssdFile]error{}
	for _, r := range frees {
		h := ssdSlotHeader{State: ssdStateFree, Slot: uint32(r.slot), SlotSize: r.f.slotSize, Gen: r.ext.Gen}
		if err := s.writeHeader(r.f, r.slot, &h); err != nil {
			failed[r.f] = err
		}
		files = ssdAppendNew(files, r.f)
	}
	for _, f := range files {
		if failed[f] != nil {
			continue
		}
		if err := f.f.Sync(); err != nil {
			failed[f] = err
		}
	}
	for f, err := range failed {
		s.noteFault("clearing freed pages", err)
		s.log.Error("ssd: clearing the commit marker of freed pages failed; they may reappear after a restart",
			"file", f.path, "err", err)
	}
	if len(failed) == 0 {
		s.clearFault("clearing freed pages", false)
	}
	for _, r := range frees {
		s.release(r.cl, r.f, r.slot, r.ext.Len, true)
	}
}

// growClass gives class cls a file (grow) and records the outcome: a
// failure holds the class's further attempts off for ssdGrowRetry, and a
// file-system error is a fault.
func (s *SSD) growClass(cls int) error {
	err := s.grow(cls)
	cl := &s.classes[cls]
	cl.mu.Lock()
	cl.growing = false
	if err != nil {
		cl.growFailed, cl.growErr = time.Now(), err
	} else {
		cl.growFailed, cl.growErr = time.Time{}, nil
	}
	cl.mu.Unlock()
	switch {
	case err == nil && !s.shortFile.Swap(false):
		s.clearFault("creating a slot file", true)
	case err == nil:
	case fsError(err):
		s.noteFault("creating a slot file", err)
	}
	return err
}

// fsError reports whether err came from the file system (not from the
// tier's own capacity accounting).
func fsError(err error) bool {
	var errno syscall.Errno
	var pe *os.PathError
	return errors.As(err, &errno) || errors.As(err, &pe)
}

// TryAlloc is Alloc without waiting for background I/O: where Alloc would
// wait for a slot file being created or freed slots being synced, it fails
// with an error wrapping ErrPending, and the caller calls WaitRoom (outside
// its locks) and tries again. Without SSDConfig.Background it is Alloc.
func (s *SSD) TryAlloc(size int64) (Extent, error) { return s.alloc(size, false) }

// WaitRoom waits until a class of size bytes that answered ErrPending may
// have room: the worker finished a round, or at most 100 ms passed, or the
// tier closed.
func (s *SSD) WaitRoom(size int64) {
	if s.worker == nil || size <= 0 || size > s.maxSize {
		return
	}
	sig := s.worker.signal()
	cl := &s.classes[classIndex(size)]
	cl.mu.Lock()
	ready := cl.hasFreeLocked() || (!cl.growing && cl.pendingFrees == 0)
	cl.mu.Unlock()
	if ready {
		return
	}
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-sig:
	case <-t.C:
	case <-s.worker.stop:
	}
}

// hasFreeLocked reports whether a file of the class has a free slot.
func (cl *ssdClass) hasFreeLocked() bool {
	for _, f := range cl.files {
		if len(f.free) > 0 {
			return true
		}
	}
	return false
}

// freeLocked counts the class's free slots.
func (cl *ssdClass) freeLocked() int {
	n := 0
	for _, f := range cl.files {
		n += len(f.free)
	}
	return n
}

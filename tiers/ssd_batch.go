package tiers

import (
	"fmt"
	"sync"
	"time"
)

// ssdBatcher is SyncBatch's group commit. Seals queue a header and wait; one
// goroutine runs rounds: take every queued Seal and every file Free dirtied,
// fdatasync those files (the payloads, and the cleared headers, are now
// durable), write the queued headers, fdatasync the files again, answer the
// Seals. A Seal that arrives during a round waits for the next, so the
// payload-before-header order of SyncEveryPage holds for every page, and a
// round's cost is two fdatasyncs per file however many Seals it carries.
// The SSD owns the goroutine: close stops it and waits.
type ssdBatcher struct {
	s        *SSD
	interval time.Duration
	wake     chan struct{} // capacity 1: work is queued
	stop     chan struct{} // closed by close
	done     chan struct{} // closed when run returns

	// mu guards the fields below.
	mu      sync.Mutex
	commits []ssdCommit
	dirty   []*ssdFile // files written since their last sync (Free's clears)
	closed  bool
}

// ssdCommit is one queued Seal.
type ssdCommit struct {
	f    *ssdFile
	slot int32
	hdr  *ssdSlotHeader
	done chan error // capacity 1
}

func newSSDBatcher(s *SSD, interval time.Duration) *ssdBatcher {
	b := &ssdBatcher{
		s:        s,
		interval: interval,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.run()
	return b
}

// commit queues a sealed header and waits for its round.
func (b *ssdBatcher) commit(f *ssdFile, slot int32, h *ssdSlotHeader) error {
	c := ssdCommit{f: f, slot: slot, hdr: h, done: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.commits = append(b.commits, c)
	b.mu.Unlock()
	b.kick()
	return <-c.done
}

// markDirty queues f for the next round's sync without waiting.
func (b *ssdBatcher) markDirty(f *ssdFile) {
	if !f.dirty.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	b.dirty = append(b.dirty, f)
	b.mu.Unlock()
	b.kick()
}

func (b *ssdBatcher) kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// close answers what is queued, stops the goroutine and waits for it.
func (b *ssdBatcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
}

func (b *ssdBatcher) run() {
	defer close(b.done)
	var timer *time.Timer
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			b.round()
			return
		}
		start := time.Now()
		b.round()
		if b.interval <= 0 {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(b.interval - time.Since(start))
		} else {
			timer.Reset(b.interval - time.Since(start))
		}
		select {
		case <-timer.C:
		case <-b.stop:
			b.round()
			return
		}
	}
}

// round runs one group commit.
func (b *ssdBatcher) round() {
	b.mu.Lock()
	commits, dirty := b.commits, b.dirty
	b.commits, b.dirty = nil, nil
	b.mu.Unlock()
	if len(commits) == 0 && len(dirty) == 0 {
		return
	}
	files := dirty
	for _, c := range commits {
		files = ssdAppendNew(files, c.f)
	}
	for _, f := range files {
		f.dirty.Store(false) // a write after this marks it again
	}
	errs := ssdSyncAll(files)
	var written []*ssdFile
	for i := range commits {
		c := &commits[i]
		if err := errs[c.f]; err != nil {
			c.done <- fmt.Errorf("syncing the payload: %w", err)
			c.done = nil
			continue
		}
		if err := b.s.writeHeader(c.f, c.slot, c.hdr); err != nil {
			c.done <- err
			c.done = nil
			continue
		}
		written = ssdAppendNew(written, c.f)
	}
	errs = ssdSyncAll(written)
	for _, c := range commits {
		if c.done == nil {
			continue
		}
		if err := errs[c.f]; err != nil {
			c.done <- fmt.Errorf("syncing the header: %w", err)
			continue
		}
		c.done <- nil
	}
}

// ssdAppendNew appends f to files unless it is there (rounds touch few files).
func ssdAppendNew(files []*ssdFile, f *ssdFile) []*ssdFile {
	for _, g := range files {
		if g == f {
			return files
		}
	}
	return append(files, f)
}

// ssdSyncAll fdatasyncs files in parallel and returns the failures.
func ssdSyncAll(files []*ssdFile) map[*ssdFile]error {
	errs := make(map[*ssdFile]error)
	if len(files) == 1 {
		if err := files[0].syncOpen(); err != nil {
			errs[files[0]] = err
		}
		return errs
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Go(func() {
			if err := f.syncOpen(); err != nil {
				mu.Lock()
				errs[f] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// syncOpen fdatasyncs f unless reclaim closed it meanwhile (it then held no
// page: there is nothing to make durable).
func (f *ssdFile) syncOpen() error {
	f.closeMu.RLock()
	defer f.closeMu.RUnlock()
	if f.closed {
		return nil
	}
	return f.f.Sync()
}

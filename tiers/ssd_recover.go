package tiers

// Recover: rebuilding the SSD tier's pages from its slot headers.
//
// Recover reads the slot headers of every adopted file and, for each sealed
// slot, the payload, and checks it against the header's checksum before the
// page is handed to fn. Verification is eager, at start-up, rather than on
// a page's first read, because:
//
//   - a page is never served wrong and never visible unverified
//     (invariants 1 and 2): once fn accepts a recovered page the store
//     treats it as published and may lease it, serve it, or promote it
//     into host memory that same-host clients read without a check. A lazy
//     check would have to sit in every one of those paths, and a page
//     failing there would already be indexed, counted and leased;
//   - the cost is one sequential read of the tier, which runs at the
//     disk's read rate with RecoveryWorkers reads in flight, against a
//     restart that otherwise serves nothing from the tier. Measured by
//     TestSSDRecoveryTime (cold page cache) on a 2-vCPU VM whose virtio
//     disk reads 0.4-0.7 GB/s sequentially: 100,000 pages of 16 KiB in
//     1.5-2.5 s, of 64 KiB (6.1 GiB) in 2.6-4.0 s, of 256 KiB (24.4 GiB)
//     in 40 s, where cat takes 67 s to read the same files. So recovery
//     takes about the tier's size over the disk's read bandwidth: a 1 TiB
//     tier on a 3 GB/s NVMe drive, some six minutes;
//   - every bad slot is found, logged and freed once, not discovered
//     piecemeal under load.
//
// Files are cut into chunks of at most 1,024 slots and 64 MiB of payload.
// RecoveryWorkers goroutines read and verify chunks in parallel (a chunk's
// headers in one read, then its sealed payloads, consecutive ones together
// up to 8 MiB a read; afterwards the payload range is dropped from the page
// cache), and Recover calls fn for the
// chunks' pages in file and slot order, on its own goroutine, so fn needs no
// locking of its own. fn may ReadAt or Free the extent it is given; Alloc
// waits until Recover returns. fn can receive one key twice (a freed page
// whose cleared marker was lost, SyncBatch/SyncNone, next to its
// republished copy): both verify, and fn refuses the one it does not keep.
//
// Per slot:
//
//   - an all-zero header: never written: free, silently;
//   - a format version this build does not read: free, with one warning
//     per chunk;
//   - a bad magic, a header CRC mismatch, fields that do not fit the slot (slot index,
//     slot size, length, checksum algorithm, generation 0), a payload past
//     the end of a truncated file, a read error, a payload checksum
//     mismatch: Dropped, logged with the file, slot and reason, and the
//     header rewritten FREE;
//   - RSRV: a page allocated but never sealed: Torn, rewritten FREE;
//   - FREE: free;
//   - SEAL and verified: handed to fn and live, unless fn returns an error,
//     when it is freed.
//
// Headers rewritten FREE are synced before Recover returns, in every mode,
// so a dropped or refused page does not come back on the next restart
// (invariant 6: no unpublished page is resurrected; a published one is lost
// only if its bytes no longer verify).
//
// Every header carries the generation of the allocation that wrote it; a
// recovered extent has its header's generation, and Recover resumes the
// counter above the highest it saw, so Extent.Gen never repeats across
// restarts.

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Chunk bounds of Recover's work items.
const (
	ssdChunkSlots = 1024
	ssdChunkBytes = 64 << 20
)

// What Recover found in a slot.
const (
	ssdFoundPage uint8 = iota + 1
	ssdFoundTorn
	ssdFoundBad
)

// ssdChunk is one of Recover's work items and, once ready is closed, its
// result.
type ssdChunk struct {
	f      *ssdFile
	lo, hi int32
	ready  chan struct{}

	found   []ssdFound // written by the worker before ready closes
	maxGen  uint64
	err     error // the headers could not be read
	unknown int   // headers of an unknown format version
}

type ssdFound struct {
	slot   int32
	what   uint8 // ssdFound*
	gen    uint64
	meta   PageMeta
	reason string
}

// ssdClear is a slot whose header Recover rewrites FREE.
type ssdClear struct {
	f    *ssdFile
	slot int32
	gen  uint64
}

// ssdRecovery is what Recover accumulates on its own goroutine.
type ssdRecovery struct {
	fn      func(Extent, PageMeta) error
	st      RecoveryStats
	clears  []ssdClear
	touched map[*ssdFile]bool // files with headers rewritten, to sync
	maxGen  uint64
}

// Recover scans every slot file, hands each sealed page that verifies to
// fn and marks it live, and frees everything else; see the design comment
// above. It runs once, before the tier allocates: a second call fails with
// ErrRecovered. An error from fn frees that page and recovery goes on. I/O
// errors on single slots drop those slots; Recover itself fails only after
// Close.
func (s *SSD) Recover(fn func(ext Extent, meta PageMeta) error) (RecoveryStats, error) {
	var st RecoveryStats
	if s.closed.Load() {
		return st, fmt.Errorf("ssd: recover: %w", ErrClosed)
	}
	if !s.started.CompareAndSwap(false, true) {
		return st, fmt.Errorf("ssd: recover: %w", ErrRecovered)
	}
	begin := time.Now()
	s.removeExcess()
	s.poolMu.Lock()
	files := slices.Clone(s.files)
	s.poolMu.Unlock()

	chunks := ssdChunks(files)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.workers, len(chunks)) {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return
				}
				buf = s.verifyChunk(&chunks[i], buf)
				close(chunks[i].ready)
			}
		})
	}
	r := &ssdRecovery{fn: fn, touched: map[*ssdFile]bool{}}
	for i := range chunks {
		c := &chunks[i]
		<-c.ready
		r.maxGen = max(r.maxGen, c.maxGen)
		if c.err != nil {
			s.log.Error("ssd: cannot read slot headers; their pages are lost",
				"file", c.f.path, "slots", fmt.Sprintf("%d-%d", c.lo, c.hi-1), "err", c.err)
		}
		if c.unknown > 0 {
			s.log.Warn("ssd: slot headers of an unknown format version, treated as free",
				"file", c.f.path, "slots", fmt.Sprintf("%d-%d", c.lo, c.hi-1), "count", c.unknown)
		}
		for _, fd := range c.found {
			s.apply(r, c.f, fd)
		}
		c.found = nil
	}
	wg.Wait()
	s.clearSlots(r)
	for _, f := range files {
		cl := &s.classes[f.class]
		cl.mu.Lock()
		f.free = make([]int32, 0, f.slots)
		for slot := f.slots - 1; slot >= 0; slot-- {
			if f.state[slot] == ssdSlotFree {
				f.free = append(f.free, slot) // lowest slot on top
			}
		}
		cl.mu.Unlock()
	}
	s.gen.Store(r.maxGen)
	s.checkSpace()
	s.ready.Store(true)
	st = r.st
	s.log.Info("ssd: recovered", "dir", s.dir, "files", len(files), "pages", st.Recovered,
		"bytes", st.Bytes, "dropped", st.Dropped, "torn", st.Torn, "took", time.Since(begin))
	return st, nil
}

// ssdChunks cuts files into Recover's work items.
func ssdChunks(files []*ssdFile) []ssdChunk {
	var chunks []ssdChunk
	for _, f := range files {
		per := int32(max(1, min(ssdChunkSlots, ssdChunkBytes/f.slotSize)))
		for lo := int32(0); lo < f.slots; lo += per {
			chunks = append(chunks, ssdChunk{f: f, lo: lo, hi: min(lo+per, f.slots), ready: make(chan struct{})})
		}
	}
	return chunks
}

// verifyChunk reads and verifies a chunk's slots into c, using and
// returning a payload buffer. Payloads of consecutive sealed slots are read
// together, up to ssdReadRun bytes a read, so small pages cost no more
// system calls than large ones.
func (s *SSD) verifyChunk(c *ssdChunk, buf []byte) []byte {
	f := c.f
	hdrs := make([]byte, int(c.hi-c.lo)*ssdSlotHeaderSize)
	if _, err := f.f.ReadAt(hdrs, f.headerOff(c.lo)); err != nil {
		c.err = err
		return buf
	}
	var sealed []int // indexes in c.found of pages whose payload is to verify
	for slot := c.lo; slot < c.hi; slot++ {
		h, err := decodeSSDSlotHeader(hdrs[int(slot-c.lo)*ssdSlotHeaderSize:][:ssdSlotHeaderSize])
		switch {
		case errors.Is(err, errSSDNoHeader):
			continue
		case errors.Is(err, errSSDVersion):
			c.unknown++
			continue
		case err != nil:
			c.found = append(c.found, ssdFound{slot: slot, what: ssdFoundBad, reason: err.Error()})
			continue
		}
		c.maxGen = max(c.maxGen, h.Gen)
		fd := ssdFound{slot: slot, gen: h.Gen}
		switch {
		case h.Slot != uint32(slot) || h.SlotSize != f.slotSize:
			fd.what, fd.reason = ssdFoundBad, fmt.Sprintf("header of slot %d of %d bytes", h.Slot, h.SlotSize)
		case h.State == ssdStateFree:
			continue
		case h.State == ssdStateReserved:
			fd.what = ssdFoundTorn
		default:
			fd.what, fd.reason = ssdFoundBad, f.checkSealed(slot, &h)
			if fd.reason == "" {
				fd.what, fd.meta = ssdFoundPage, h.Meta
				sealed = append(sealed, len(c.found))
			}
		}
		c.found = append(c.found, fd)
	}
	for len(sealed) > 0 {
		n := 1 // pages in this read: consecutive slots, at most ssdReadRun bytes
		for n < len(sealed) && c.found[sealed[n]].slot == c.found[sealed[0]].slot+int32(n) &&
			int64(n+1)*f.slotSize <= ssdReadRun {
			n++
		}
		buf = s.verifyRun(f, c.found, sealed[:n], buf)
		sealed = sealed[n:]
	}
	if dn, ok := f.f.(ssdDontNeeder); ok {
		dn.dontNeed(f.payloadOff(c.lo), int64(c.hi-c.lo)*f.slotSize)
	}
	return buf
}

// ssdReadRun bounds the bytes Recover reads with one system call.
const ssdReadRun = 8 << 20

// checkSealed checks a sealed header's fields against its file; it returns
// why the page is bad, or "".
func (f *ssdFile) checkSealed(slot int32, h *ssdSlotHeader) string {
	m := &h.Meta
	switch {
	case h.Gen == 0:
		return "generation 0"
	case m.Len <= 0 || m.Len > f.slotSize:
		return fmt.Sprintf("length %d does not fit the %d-byte slot", m.Len, f.slotSize)
	case ssdChecksumLen(m.ChecksumAlg) == 0 || len(m.Checksum) != ssdChecksumLen(m.ChecksumAlg):
		return fmt.Sprintf("checksum algorithm %d with %d bytes", m.ChecksumAlg, len(m.Checksum))
	case f.payloadOff(slot)+m.Len > f.found:
		return fmt.Sprintf("payload past the end of the truncated file (%d bytes)", f.found)
	}
	return ""
}

// verifyRun reads the payloads of found[run[0]], ... (consecutive slots)
// with one read and checks each against its checksum, marking the bad ones.
// If the read fails, each page is read alone, so that one bad sector costs
// one page.
func (s *SSD) verifyRun(f *ssdFile, found []ssdFound, run []int, buf []byte) []byte {
	first, last := &found[run[0]], &found[run[len(run)-1]]
	start := f.payloadOff(first.slot)
	span := f.payloadOff(last.slot) + last.meta.Len - start
	if int64(cap(buf)) < span {
		buf = make([]byte, max(span, min(ssdReadRun, 8*f.slotSize)))
	}
	if _, err := f.f.ReadAt(buf[:span], start); err != nil {
		if len(run) > 1 {
			for i := range run {
				buf = s.verifyRun(f, found, run[i:i+1], buf)
			}
			return buf
		}
		first.what, first.meta, first.reason = ssdFoundBad, PageMeta{}, "reading the payload: "+err.Error()
		return buf
	}
	var sum [32]byte
	for _, i := range run {
		fd := &found[i]
		off := f.payloadOff(fd.slot) - start
		if !bytes.Equal(ssdChecksum(sum[:], fd.meta.ChecksumAlg, buf[off:off+fd.meta.Len]), fd.meta.Checksum) {
			fd.what, fd.meta, fd.reason = ssdFoundBad, PageMeta{}, "payload checksum mismatch"
		}
	}
	return buf
}

// apply records one slot's outcome: a page is made live and handed to fn,
// anything else counted and queued for clearing.
func (s *SSD) apply(r *ssdRecovery, f *ssdFile, fd ssdFound) {
	switch fd.what {
	case ssdFoundBad:
		r.st.Dropped++
		s.log.Warn("ssd: dropping a slot that does not verify", "file", f.path, "slot", fd.slot, "reason", fd.reason)
		r.clears = append(r.clears, ssdClear{f, fd.slot, fd.gen})
		return
	case ssdFoundTorn:
		r.st.Torn++
		r.clears = append(r.clears, ssdClear{f, fd.slot, fd.gen})
		return
	}
	cl := &s.classes[f.class]
	n := fd.meta.Len
	cl.mu.Lock()
	f.gens[fd.slot], f.state[fd.slot] = fd.gen, ssdSlotSealed
	f.live++
	cl.extents++
	cl.requested += n
	cl.mu.Unlock()
	s.count(1, cl.size, n)
	r.st.Recovered++
	r.st.Bytes += n
	ext := Extent{Off: int64(f.id)<<ssdOffShift | f.payloadOff(fd.slot), Len: n, Cap: f.slotSize, Gen: fd.gen}
	if err := r.fn(ext, fd.meta); err != nil {
		cl.mu.Lock()
		live := f.gens[fd.slot] == fd.gen && f.state[fd.slot] == ssdSlotSealed
		cl.mu.Unlock()
		if live { // unless fn freed it itself
			s.Free(ext)
		}
		r.touched[f] = true // clearSlots syncs it
	}
}

// clearSlots rewrites the headers of dropped and torn slots FREE, then
// syncs every file whose headers were rewritten (by it or by a Free of a
// page fn refused). Failures are logged: the worst they cause is a dropped
// slot dropped again at the next restart.
func (s *SSD) clearSlots(r *ssdRecovery) {
	for _, c := range r.clears {
		h := ssdSlotHeader{State: ssdStateFree, Slot: uint32(c.slot), SlotSize: c.f.slotSize, Gen: c.gen}
		if err := s.writeHeader(c.f, c.slot, &h); err != nil {
			s.log.Error("ssd: clearing a dropped slot", "file", c.f.path, "slot", c.slot, "err", err)
		}
		r.touched[c.f] = true
	}
	for f, err := range ssdSyncAll(slices.Collect(maps.Keys(r.touched))) {
		s.log.Error("ssd: syncing cleared slot headers", "file", f.path, "err", err)
	}
}

// removeExcess removes the files that did not fit Capacity at open, logging
// how many sealed pages each held.
func (s *SSD) removeExcess() {
	s.poolMu.Lock()
	excess := s.excess
	s.excess = nil
	s.poolMu.Unlock()
	for _, f := range excess {
		s.log.Warn("ssd: removing a slot file beyond Capacity", "file", f.path, "bytes", f.length,
			"capacity", s.capacity, "sealed_pages", s.countSealed(f))
		s.removeFile(f)
	}
}

// countSealed counts a file's headers in state SEAL (headers only).
func (s *SSD) countSealed(f *ssdFile) int {
	n := 0
	for _, c := range ssdChunks([]*ssdFile{f}) {
		hdrs := make([]byte, int(c.hi-c.lo)*ssdSlotHeaderSize)
		if _, err := f.f.ReadAt(hdrs, f.headerOff(c.lo)); err != nil {
			break
		}
		for i := 0; i < len(hdrs); i += ssdSlotHeaderSize {
			if h, err := decodeSSDSlotHeader(hdrs[i : i+ssdSlotHeaderSize]); err == nil && h.State == ssdStateSealed {
				n++
			}
		}
	}
	return n
}

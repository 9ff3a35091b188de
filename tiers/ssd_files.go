package tiers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ssdFileName returns the name of slot file id of slots of slotSize bytes.
func ssdFileName(slotSize int64, id uint32) string {
	return fmt.Sprintf("class-%d-%06d.slots", slotSize, id)
}

// parseSSDFileName parses a slot file's name.
func parseSSDFileName(name string) (slotSize int64, id uint32, ok bool) {
	var n int
	if _, err := fmt.Sscanf(name, "class-%d-%d.slots", &slotSize, &n); err != nil || slotSize <= 0 ||
		n < 0 || n > ssdMaxFileID || ssdFileName(slotSize, uint32(n)) != name {
		return 0, 0, false
	}
	return slotSize, uint32(n), true
}

// open finds the directory's slot files, adopts those that fit Capacity and
// sets up the class table, with classes up to maxCls and any larger class
// an adopted file holds. On error, the files it opened are in s.files or
// s.excess, for closeFiles.
func (s *SSD) open(maxCls int) error {
	found, err := s.scanDir()
	if err != nil {
		return err
	}
	ncls := maxCls + 1
	for _, f := range found {
		s.nextID = max(s.nextID, f.id+1)
		if s.fileBytes+f.length > s.capacity {
			s.excess = append(s.excess, f)
			continue
		}
		s.files = append(s.files, f)
		s.fileBytes += f.length
		ncls = max(ncls, f.class+1)
	}
	for _, f := range s.files {
		if err := s.extend(f); err != nil {
			return err
		}
	}
	s.classes = make([]ssdClass, ncls)
	for i := range s.classes {
		s.classes[i].size = classSize(i)
	}
	for _, f := range s.files {
		f.gens = make([]uint64, f.slots)
		f.state = make([]uint8, f.slots)
		cl := &s.classes[f.class]
		cl.files = append(cl.files, f) // in id order
	}
	return nil
}

// scanDir opens the directory's slot files, sorted by id. It removes stray
// temporary files and files whose file header does not verify.
func (s *SSD) scanDir() ([]*ssdFile, error) {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("ssd: listing %s: %w", s.dir, err)
	}
	var found []*ssdFile
	fail := func(err error) ([]*ssdFile, error) {
		for _, f := range found {
			f.f.Close()
		}
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.dir, name)
		if strings.HasPrefix(name, "class-") && strings.HasSuffix(name, ".slots.tmp") {
			s.log.Info("ssd: removing a slot file left half-made by a crash", "file", path)
			if err := s.fs.Remove(path); err != nil {
				return fail(fmt.Errorf("ssd: removing %s: %w", path, err))
			}
			continue
		}
		slotSize, id, ok := parseSSDFileName(name)
		if !ok {
			continue
		}
		f, err := s.openFile(path, slotSize, id)
		if errors.Is(err, errSSDNoHeader) || errors.Is(err, errSSDCorrupt) || errors.Is(err, errSSDVersion) {
			// Without a readable file header the slot geometry is
			// unknown: the file's pages are lost. (A read error is not
			// this: it fails the open rather than destroy the file.)
			s.log.Error("ssd: removing a slot file whose file header does not verify", "file", path, "err", err)
			if err := s.fs.Remove(path); err != nil {
				return fail(fmt.Errorf("ssd: removing %s: %w", path, err))
			}
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("ssd: opening %s: %w", path, err))
		}
		found = append(found, f)
	}
	slices.SortFunc(found, func(a, b *ssdFile) int { return int(int64(a.id) - int64(b.id)) })
	return found, nil
}

// openFile opens a slot file and checks its file header against its name.
func (s *SSD) openFile(path string, slotSize int64, id uint32) (*ssdFile, error) {
	fh, err := s.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	f, err := readSSDFileHeader(fh, path, slotSize, id)
	if err != nil {
		fh.Close()
		return nil, err
	}
	return f, nil
}

func readSSDFileHeader(fh File, path string, slotSize int64, id uint32) (*ssdFile, error) {
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, ssdFileHeaderUsed)
	if st.Size() < int64(len(b)) {
		return nil, fmt.Errorf("%d bytes long: %w", st.Size(), errSSDNoHeader)
	}
	if _, err := fh.ReadAt(b, 0); err != nil {
		return nil, err
	}
	h, err := decodeSSDFileHeader(b)
	if err != nil {
		return nil, err
	}
	cls := classIndex(h.SlotSize)
	if h.ID != id || h.SlotSize != slotSize || classSize(cls) != h.SlotSize {
		return nil, fmt.Errorf("header says id %d, slot size %d: %w", h.ID, h.SlotSize, errSSDCorrupt)
	}
	return &ssdFile{
		f:        fh,
		path:     path,
		id:       id,
		class:    cls,
		slotSize: h.SlotSize,
		slots:    h.Slots,
		dataOff:  h.DataOff,
		length:   h.Length,
		found:    min(st.Size(), h.Length),
	}, nil
}

// extend grows a truncated file back to its length; the lost range reads
// as zeros, and Recover drops the sealed pages that lay in it.
func (s *SSD) extend(f *ssdFile) error {
	if f.found >= f.length {
		return nil
	}
	s.log.Warn("ssd: slot file is shorter than its geometry (truncated); extending it, pages past the end are lost",
		"file", f.path, "length", f.found, "want", f.length)
	if err := ssdPreallocate(f.f, f.found, f.length); err != nil {
		return fmt.Errorf("ssd: extending %s to %d bytes: %w", f.path, f.length, err)
	}
	return nil
}

// ssdPreallocate makes [from, to) of a file allocated and zero: fallocate, or
// ftruncate (a sparse file) where fallocate is unsupported.
func ssdPreallocate(fh File, from, to int64) error {
	err := fh.Fallocate(from, to-from)
	if errors.Is(err, errors.ErrUnsupported) {
		err = fh.Truncate(to)
	}
	return err
}

// room returns the capacity no file takes.
func (s *SSD) room() int64 {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	return s.capacity - s.fileBytes
}

// grow gives class cls a new file, unless another goroutine gave it a free
// slot meanwhile. When capacity is short it removes empty files of other
// classes first. With a worker, a file system too full for a whole file
// gets a smaller one, and the tier stays in the disk-full fault. Errors
// wrap ErrFull.
func (s *SSD) grow(cls int) error {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	cl := &s.classes[cls]
	cl.mu.Lock()
	has := cl.hasFreeLocked()
	cl.mu.Unlock()
	if has {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	need := ssdFileLength(cl.size, 1)
	for s.room() < need {
		if !s.reclaim() {
			return fmt.Errorf("no free slot, %d bytes of capacity left and no empty file: %w", s.room(), ErrFull)
		}
	}
	budget := min(s.fileSize, s.room())
	f, err := s.createFile(cls, budget)
	// A file system with less room than a file takes holds a smaller one:
	// halve it down to one slot (at most ~20 fallocates that fail fast).
	short := false
	for err != nil && errors.Is(err, syscall.ENOSPC) && s.worker != nil && budget/2 >= need {
		budget /= 2
		short = true
		f, err = s.createFile(cls, budget)
	}
	if err != nil {
		return fmt.Errorf("creating a slot file: %w: %w", ErrFull, err)
	}
	if short {
		s.shortFile.Store(true)
		s.noteFault("creating a slot file", fmt.Errorf("only %d bytes of a %d-byte slot file fit in %s: %w",
			f.length, min(s.fileSize, s.room()+f.length), s.dir, syscall.ENOSPC))
	}
	s.poolMu.Lock()
	i, _ := slices.BinarySearchFunc(s.files, f.id, ssdByID)
	s.files = slices.Insert(s.files, i, f)
	s.fileBytes += f.length
	s.poolMu.Unlock()
	cl.mu.Lock()
	i, _ = slices.BinarySearchFunc(cl.files, f.id, ssdByID)
	cl.files = slices.Insert(cl.files, i, f)
	cl.mu.Unlock()
	return nil
}

func ssdByID(f *ssdFile, id uint32) int { return int(int64(f.id) - int64(id)) }

// reclaim removes one empty file (no slot allocated), the newest, and
// reports whether there was one. s.growMu must be held.
func (s *SSD) reclaim() bool {
	s.poolMu.Lock()
	files := slices.Clone(s.files)
	s.poolMu.Unlock()
	for _, f := range slices.Backward(files) {
		cl := &s.classes[f.class]
		cl.mu.Lock()
		i, ok := slices.BinarySearchFunc(cl.files, f.id, ssdByID)
		empty := ok && f.live == 0
		if empty {
			// Out of the class first: no Alloc can take a slot of it now.
			cl.files = slices.Delete(cl.files, i, i+1)
		}
		cl.mu.Unlock()
		if !empty {
			continue
		}
		s.poolMu.Lock()
		if i, ok := slices.BinarySearchFunc(s.files, f.id, ssdByID); ok {
			s.files = slices.Delete(s.files, i, i+1)
		}
		s.fileBytes -= f.length
		s.poolMu.Unlock()
		s.log.Info("ssd: removing an empty slot file for another size class", "file", f.path)
		s.removeFile(f)
		return true
	}
	return false
}

// removeFile closes and removes a file that is no longer listed. Errors are
// logged: a file that could not be removed is adopted again on restart.
func (s *SSD) removeFile(f *ssdFile) {
	f.closeMu.Lock()
	f.closed = true
	cerr := f.f.Close()
	f.closeMu.Unlock()
	err := errors.Join(cerr, s.fs.Remove(f.path), s.fs.SyncDir(s.dir))
	if err != nil {
		s.log.Error("ssd: removing a slot file", "file", f.path, "err", err)
	}
}

// createFile makes a slot file of class cls of at most budget bytes with
// every slot free: under a temporary name it is preallocated, its header
// written and synced; then it is renamed and the directory synced.
func (s *SSD) createFile(cls int, budget int64) (*ssdFile, error) {
	size := classSize(cls)
	slots, length := ssdSlotsFor(size, budget)
	if slots == 0 {
		return nil, fmt.Errorf("%d bytes cannot hold a %d-byte slot", budget, size)
	}
	id, err := s.takeID()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, ssdFileName(size, id))
	tmp := path + ".tmp"
	fh, err := s.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	h := ssdFileHeader{Slots: slots, SlotSize: size, DataOff: ssdDataOff(slots), Length: length, ID: id,
		Created: time.Now().UnixNano()}
	b := make([]byte, ssdFileHeaderSize)
	h.encode(b)
	err = ssdPreallocate(fh, 0, length)
	if err == nil {
		_, err = fh.WriteAt(b, 0)
	}
	if err == nil {
		err = fh.Sync()
	}
	if err == nil {
		err = s.fs.Rename(tmp, path)
		if err == nil {
			tmp = path // from here on, undo removes the real name
			err = s.fs.SyncDir(s.dir)
		}
	}
	if err == nil {
		// Reopen under the real name, which errors then carry.
		var named File
		if named, err = s.fs.OpenFile(path, os.O_RDWR, 0); err == nil {
			fh.Close()
			fh = named
		}
	}
	if err != nil {
		fh.Close()
		s.fs.Remove(tmp)
		return nil, err
	}
	f := &ssdFile{f: fh, path: path, id: id, class: cls, slotSize: size, slots: slots,
		dataOff: h.DataOff, length: length, found: length,
		gens: make([]uint64, slots), state: make([]uint8, slots), free: make([]int32, slots)}
	for i := range f.free {
		f.free[i] = slots - 1 - int32(i) // lowest slot on top
	}
	return f, nil
}

// takeID returns an unused file id: the next one, or after 2^23 files the
// lowest one unused.
func (s *SSD) takeID() (uint32, error) {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.nextID <= ssdMaxFileID {
		s.nextID++
		return s.nextID - 1, nil
	}
	all := append(slices.Clone(s.files), s.excess...)
	slices.SortFunc(all, func(a, b *ssdFile) int { return int(int64(a.id) - int64(b.id)) })
	var want uint32
	for _, f := range all {
		if f.id == want {
			want++
		}
	}
	if want > ssdMaxFileID {
		return 0, errors.New("no file id left")
	}
	return want, nil
}

package tiers

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Disk trouble.
//
// The tier classifies every I/O error it meets on a write path (creating a
// slot file, a slot header, a Seal, a Free) into a fault: FaultFull for
// ENOSPC and EDQUOT, FaultReadOnly for EROFS, FaultIO for the rest
// (EIO and the like). The tier is in at most one fault at a time, the last
// seen; it logs each change of fault once (entering at warn or error,
// leaving at info), never per failed call, and SSD.Fault reports it for
// metrics and the CLI. A fault ends when the operation that could not be
// done succeeds again: a slot file is created (full), or a header is
// written and synced (read-only, I/O).
//
// While in a fault the tier's effective capacity (Stats.Capacity) is what
// its files hold, not its configured capacity: a full file system cannot
// give it more files, and a read-only one not even a slot (Capacity is
// then what is used). With SSDConfig.Background, a class that needs a file
// and failed to create one does not try again for ssdGrowRetry: until then
// Alloc answers ErrFull at once, without I/O, so a full disk costs one
// failed fallocate a second, not one per allocation (inline, every Alloc
// that finds no slot tries again). A read-only tier answers ErrFailing (not ErrFull:
// dropping its pages would make no room), so the store places pages in the
// other tiers and keeps those already on disk readable.

// Fault is the kind of disk trouble an SSD tier is in.
type Fault uint8

// Faults.
const (
	FaultNone     Fault = iota // writes succeed
	FaultFull                  // the file system is full (ENOSPC, EDQUOT)
	FaultReadOnly              // the file system is read-only (EROFS)
	FaultIO                    // writes fail with other errors (EIO)
)

// String names the fault as metrics and the CLI show it.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "ok"
	case FaultFull:
		return "disk-full"
	case FaultReadOnly:
		return "read-only"
	case FaultIO:
		return "io-error"
	}
	return "unknown"
}

// FaultState is an SSD tier's fault now.
type FaultState struct {
	Fault Fault
	// Err is the error that put the tier in the fault; nil when none.
	Err error
	// Since is when the tier entered the fault.
	Since time.Time
}

// ssdGrowRetry is how long a class that failed to create a slot file
// waits before Alloc tries again.
const ssdGrowRetry = time.Second

// faultOf classifies an I/O error.
func faultOf(err error) Fault {
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return FaultFull
	case errors.Is(err, syscall.EROFS):
		return FaultReadOnly
	}
	return FaultIO
}

// ssdHealth is the tier's fault, guarded by mu; cur mirrors state.Fault so
// that the common no-fault path reads one atomic.
type ssdHealth struct {
	mu    sync.Mutex
	state FaultState
}

// Fault reports the tier's disk trouble now.
func (s *SSD) Fault() FaultState {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.state
}

// noteFault records that op failed with err; a change of fault is logged.
// Errors that are the tier's own (closed, stale) are not faults.
func (s *SSD) noteFault(op string, err error) {
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrStale) || errors.Is(err, ErrSealed) {
		return
	}
	f := faultOf(err)
	s.health.mu.Lock()
	old := s.health.state.Fault
	if old != f {
		s.health.state = FaultState{Fault: f, Err: err, Since: time.Now()}
		s.faulty.Store(true)
	}
	s.health.mu.Unlock()
	if old == f {
		return
	}
	st := s.Stats()
	if f == FaultFull {
		s.log.Warn("ssd: file system full: the tier holds what its slot files hold; pages go to the other tiers",
			"dir", s.dir, "op", op, "err", err, "was", old.String(), "effective_capacity", st.Capacity,
			"configured_capacity", s.capacity)
		return
	}
	s.log.Error("ssd: writes failing", "fault", f.String(), "dir", s.dir, "op", op, "err", err, "was", old.String(),
		"effective_capacity", st.Capacity)
}

// clearFault records that op succeeded, ending the faults it disproves:
// creating a file ends every fault; a synced header write ends all but a
// full file system (files are preallocated, so it proves nothing there).
func (s *SSD) clearFault(op string, grew bool) {
	if !s.faulty.Load() {
		return
	}
	s.health.mu.Lock()
	old := s.health.state
	if old.Fault == FaultNone || (old.Fault == FaultFull && !grew) {
		s.health.mu.Unlock()
		return
	}
	s.health.state = FaultState{}
	s.faulty.Store(false)
	s.health.mu.Unlock()
	s.log.Info("ssd: writes succeed again", "dir", s.dir, "op", op, "was", old.Fault.String(),
		"for", time.Since(old.Since).Round(time.Millisecond))
}

// effectiveCapacity is Stats.Capacity: see the design comment.
func (s *SSD) effectiveCapacity() int64 {
	if !s.faulty.Load() {
		return s.capacity
	}
	switch s.Fault().Fault {
	case FaultNone:
		return s.capacity
	case FaultReadOnly:
		return s.used.Load()
	}
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	return s.fileBytes
}

// currentFault is Fault().Fault, one atomic load when there is none.
func (s *SSD) currentFault() Fault {
	if !s.faulty.Load() {
		return FaultNone
	}
	return s.Fault().Fault
}

// checkSpace puts the tier in a fault at once, before any allocation
// tries, when its directory's file system is read-only or has no room for
// the next slot file the tier may create (Recover runs it).
func (s *SSD) checkSpace() {
	free, ro, err := ssdSpace(s.dir)
	if err != nil {
		s.log.Warn("ssd: cannot tell the file system's free space", "dir", s.dir, "err", err)
		return
	}
	s.poolMu.Lock()
	need := min(s.fileSize, s.capacity-s.fileBytes)
	s.poolMu.Unlock()
	switch {
	case ro:
		s.noteFault("checking the file system", fmt.Errorf("%s is on a read-only file system: %w", s.dir, syscall.EROFS))
	case need > 0 && free < need:
		s.noteFault("checking free space", fmt.Errorf("%d bytes free for %s, a new slot file takes %d: %w",
			free, s.dir, need, syscall.ENOSPC))
	}
}

package rdma

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// registrar is the device's side of memory registration: ibv_reg_mr and
// ibv_dereg_mr on a protection domain (verbs.go). Memory keeps the books
// around it, so that what the books promise is tested without a device.
type registrar interface {
	// register registers mem for local and remote access.
	register(mem []byte) (registration, error)
	// deregister releases what register returned; Memory calls it once
	// per registration.
	deregister(registration) error
}

// registration is what a registrar made of some memory: the keys a
// local op (lkey) and a peer (rkey) name it by, and the handle the
// registrar releases it by.
type registration struct {
	handle     any
	lkey, rkey uint32
}

// Memory is the books of the regions registered through one registrar
// (a Device's): each Region is deregistered once, by its owner or at
// Close, and counted.
type Memory struct {
	r                        registrar
	registered, deregistered atomic.Int64

	// mu guards live and closed.
	mu     sync.Mutex
	live   map[*Region]struct{}
	closed bool
}

func newMemory(r registrar) *Memory {
	return &Memory{r: r, live: map[*Region]struct{}{}}
}

// Region is memory registered on a Device: a peer's op may reach it by
// the rkey its owner's Endpoint carries, a local op through Read and Write.
type Region struct {
	m   *Memory
	mem []byte
	reg registration
	// free releases mem once deregistered (Device.Alloc's mapping); nil:
	// the memory is the caller's.
	free func([]byte) error
}

// Register registers mem, which must not move or be freed until the region
// is deregistered (mmap'd memory, not the Go heap).
func (m *Memory) Register(mem []byte) (*Region, error) { return m.register(mem, nil) }

// register registers mem, to be released by free (nil: the caller's) once
// deregistered.
func (m *Memory) register(mem []byte, free func([]byte) error) (*Region, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("registering no memory: %w", ErrOutOfRange)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("registering %d bytes: %w", len(mem), ErrClosed)
	}
	reg, err := m.r.register(mem)
	if err != nil {
		return nil, fmt.Errorf("registering %d bytes: %w", len(mem), err)
	}
	r := &Region{m: m, mem: mem, reg: reg, free: free}
	m.live[r] = struct{}{}
	m.registered.Add(1)
	return r, nil
}

// Deregister releases the region; its memory may then be freed. A second
// Deregister is refused with ErrDeregistered.
func (r *Region) Deregister() error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return r.m.deregisterLocked(r)
}

func (m *Memory) deregisterLocked(r *Region) error {
	if _, ok := m.live[r]; !ok {
		return fmt.Errorf("deregistering %d bytes: %w", len(r.mem), ErrDeregistered)
	}
	delete(m.live, r)
	m.deregistered.Add(1)
	err := m.r.deregister(r.reg)
	if r.free != nil && err == nil { // memory a device may still reach stays mapped
		err = r.free(r.mem)
	}
	return err
}

// Bytes is the region's memory.
func (r *Region) Bytes() []byte { return r.mem }

// registered reports whether the region is still registered.
func (r *Region) registered() bool {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	_, ok := r.m.live[r]
	return ok
}

// contains reports whether buf lies within the region's memory.
func (r *Region) contains(buf []byte) bool {
	if len(buf) == 0 || len(r.mem) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= base && p-base <= uintptr(len(r.mem)) && uintptr(len(buf)) <= uintptr(len(r.mem))-(p-base)
}

// Counts is how many regions were registered and deregistered; their
// difference is how many are registered now.
func (m *Memory) Counts() (registered, deregistered int64) {
	return m.registered.Load(), m.deregistered.Load()
}

// Close refuses further registrations and deregisters the regions left,
// which it reports as leaked (ErrLeaked): their owners should have.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if len(m.live) == 0 {
		return nil
	}
	errs := []error{fmt.Errorf("%d memory regions still registered: %w", len(m.live), ErrLeaked)}
	for r := range m.live {
		errs = append(errs, m.deregisterLocked(r))
	}
	return errors.Join(errs...)
}

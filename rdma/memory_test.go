package rdma

import (
	"errors"
	"testing"
)

// fakeRegistrar stands in for a device's ibv_reg_mr and ibv_dereg_mr: it
// hands out keys and records which registrations are live, failing the
// test on a deregistration of one it does not hold (a double free).
type fakeRegistrar struct {
	t    *testing.T
	next uint32
	live map[uint32]bool
	fail error // returned by the next register, then cleared
	// deregErr is returned by every deregister.
	deregErr error
	calls    struct{ register, deregister int }
}

func newFake(t *testing.T) *fakeRegistrar {
	return &fakeRegistrar{t: t, live: map[uint32]bool{}}
}

func (f *fakeRegistrar) register([]byte) (registration, error) {
	f.calls.register++
	if err := f.fail; err != nil {
		f.fail = nil
		return registration{}, err
	}
	f.next++
	f.live[f.next] = true
	return registration{handle: f.next, lkey: f.next, rkey: f.next << 8}, nil
}

func (f *fakeRegistrar) deregister(r registration) error {
	f.calls.deregister++
	k := r.handle.(uint32)
	if !f.live[k] {
		f.t.Errorf("registration %d deregistered twice, or never registered", k)
	}
	delete(f.live, k)
	return f.deregErr
}

// TestMemoryBooks: each region is deregistered with the registrar once;
// a second Deregister is refused without reaching it; the counts say
// what happened; Close frees what was left and reports it as leaked.
func TestMemoryBooks(t *testing.T) {
	f := newFake(t)
	m := newMemory(f)
	mem := make([]byte, 4096) // the fake never hands memory to a device
	a, err := m.Register(mem[:1024])
	must(t, err)
	b, err := m.Register(mem[1024:])
	must(t, err)
	if a.reg.rkey == b.reg.rkey {
		t.Fatal("two regions share an rkey")
	}
	must(t, a.Deregister())
	if err := a.Deregister(); !errors.Is(err, ErrDeregistered) {
		t.Fatalf("second deregister: %v, want ErrDeregistered", err)
	}
	if f.calls.deregister != 1 {
		t.Fatalf("registrar asked to deregister %d times, want 1", f.calls.deregister)
	}
	if reg, dereg := m.Counts(); reg != 2 || dereg != 1 {
		t.Fatalf("counts %d registered, %d deregistered; want 2, 1", reg, dereg)
	}

	// b is left registered: Close frees it and says so.
	if err := m.Close(); !errors.Is(err, ErrLeaked) {
		t.Fatalf("close with a region left: %v, want ErrLeaked", err)
	}
	if len(f.live) != 0 {
		t.Fatalf("%d registrations live after Close", len(f.live))
	}
	if err := b.Deregister(); !errors.Is(err, ErrDeregistered) {
		t.Fatalf("deregistering a region Close freed: %v, want ErrDeregistered", err)
	}
	if _, err := m.Register(mem); !errors.Is(err, ErrClosed) {
		t.Fatalf("register after close: %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if reg, dereg := m.Counts(); reg != 2 || dereg != 2 || f.calls.register != 2 || f.calls.deregister != 2 {
		t.Fatalf("counts %d, %d, registrar calls %+v; want every registration freed once", reg, dereg, f.calls)
	}
}

// TestMemoryRefusals: no memory is refused before the registrar is asked,
// and a registration the registrar fails is neither counted nor kept.
func TestMemoryRefusals(t *testing.T) {
	f := newFake(t)
	m := newMemory(f)
	if _, err := m.Register(nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("registering nothing: %v, want ErrOutOfRange", err)
	}
	boom := errors.New("ibv_reg_mr failed")
	f.fail = boom
	if _, err := m.Register(make([]byte, 64)); !errors.Is(err, boom) {
		t.Fatalf("failed registration: %v, want %v", err, boom)
	}
	if reg, _ := m.Counts(); reg != 0 || f.calls.register != 1 {
		t.Fatalf("%d registered, registrar asked %d times; want 0, 1", reg, f.calls.register)
	}
	must(t, m.Close())
}

// TestMemoryFrees: memory the package mapped (Device.Alloc) is released
// once, after its deregistration, whether its owner or Close deregisters
// it, and never while a failed deregistration may leave it reachable.
func TestMemoryFrees(t *testing.T) {
	f := newFake(t)
	m := newMemory(f)
	freed := map[*byte]int{}
	free := func(b []byte) error {
		freed[&b[0]]++
		return nil
	}
	a, b, c := make([]byte, 64), make([]byte, 64), make([]byte, 64)
	ra, err := m.register(a, free)
	must(t, err)
	_, err = m.register(b, free)
	must(t, err)
	must(t, ra.Deregister())
	if err := ra.Deregister(); !errors.Is(err, ErrDeregistered) || freed[&a[0]] != 1 {
		t.Fatalf("second deregister: %v, freed %d times; want ErrDeregistered, once", err, freed[&a[0]])
	}
	if err := m.Close(); !errors.Is(err, ErrLeaked) || freed[&b[0]] != 1 {
		t.Fatalf("close: %v, leaked region freed %d times; want ErrLeaked, once", err, freed[&b[0]])
	}

	// A deregistration the device fails keeps the memory.
	f = newFake(t)
	m = newMemory(f)
	rc, err := m.register(c, free)
	must(t, err)
	f.deregErr = errors.New("ibv_dereg_mr: errno 16")
	if err := rc.Deregister(); !errors.Is(err, f.deregErr) || freed[&c[0]] != 0 {
		t.Fatalf("failed deregistration: %v, memory freed %d times; want its error, kept", err, freed[&c[0]])
	}
}

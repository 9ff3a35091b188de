package rdma

import (
	"errors"
	"testing"
)

// TestCheckOps: a batch is refused, before anything is posted, when an
// op's buffer leaves the local region or its extent the peer's memory.
func TestCheckOps(t *testing.T) {
	f := newFake(t)
	m := newMemory(f)
	mem := make([]byte, 8192)
	local, err := m.Register(mem[1024:5120])
	must(t, err)
	defer func() { must(t, local.Deregister()) }()
	remote := Endpoint{Size: 1 << 16}
	for _, tc := range []struct {
		name string
		op   Op
		ok   bool
	}{
		{"whole region", Op{Off: 0, Buf: mem[1024:5120]}, true},
		{"last peer bytes", Op{Off: 1<<16 - 16, Buf: mem[1024:1040]}, true},
		{"empty", Op{Buf: mem[1024:1024]}, false},
		{"before the region", Op{Buf: mem[1000:1100]}, false},
		{"past the region", Op{Buf: mem[5000:5200]}, false},
		{"other memory", Op{Buf: make([]byte, 16)}, false},
		{"negative offset", Op{Off: -1, Buf: mem[1024:1040]}, false},
		{"past the peer", Op{Off: 1<<16 - 15, Buf: mem[1024:1040]}, false},
		{"offset past the peer", Op{Off: 1 << 17, Buf: mem[1024:1040]}, false},
	} {
		err := checkOps(local, remote, []Op{{Off: 0, Buf: mem[1024:1040]}, tc.op})
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrOutOfRange)) {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestOpenUnavailable: a device that is not there is ErrUnavailable in
// every build, with the reason: no rdma tag, no device, no such device.
func TestOpenUnavailable(t *testing.T) {
	d, err := Open(Config{Device: "strata-no-such-device"})
	if !errors.Is(err, ErrUnavailable) {
		if err == nil {
			d.Close()
		}
		t.Fatalf("opening a device that does not exist: %v, want ErrUnavailable", err)
	}
	t.Logf("%v (%d devices)", err, Devices())
}

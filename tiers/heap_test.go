package tiers

import (
	"bytes"
	"errors"
	"testing"
)

// TestHeap: a Heap hands out exactly its capacity, keeps what is written,
// refuses ranges outside an extent and frees room for the next Alloc.
func TestHeap(t *testing.T) {
	h, err := NewHeap(3 * 64)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var exts []Extent
	for range 3 {
		e, err := h.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		exts = append(exts, e)
	}
	if _, err := h.Alloc(1); !errors.Is(err, ErrFull) {
		t.Fatalf("Alloc past capacity: %v, want ErrFull", err)
	}
	if _, err := h.Alloc(4 * 64); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Alloc beyond capacity: %v, want ErrTooLarge", err)
	}
	if exts[0].Gen == exts[1].Gen || exts[0].Off == exts[1].Off {
		t.Fatalf("extents share an offset or generation: %+v %+v", exts[0], exts[1])
	}
	want := bytes.Repeat([]byte("strata"), 10)
	if err := h.WriteAt(exts[1], want, 4); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := h.ReadAt(exts[1], got, 4); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %q, %v; want %q", got, err, want)
	}
	if !bytes.Equal(h.Bytes(exts[1])[4:4+len(want)], want) {
		t.Fatal("Bytes does not show what was written")
	}
	if err := h.WriteAt(exts[1], want, 5); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("write past the extent: %v, want ErrOutOfRange", err)
	}
	if st := h.Stats(); st.Used != 3*64 || st.Extents != 3 || st.Capacity != 3*64 {
		t.Fatalf("stats %+v", st)
	}
	h.Free(exts[1])
	if err := h.ReadAt(exts[1], got, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read of a freed extent: %v, want ErrOutOfRange", err)
	}
	if _, err := h.Alloc(64); err != nil {
		t.Fatalf("Alloc after Free: %v", err)
	}
	if _, err := NewHeap(0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewHeap(0): %v, want ErrInvalidConfig", err)
	}
}

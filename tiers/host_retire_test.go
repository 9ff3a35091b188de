package tiers

import (
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
)

// TestHostRetire: a retired extent keeps its bytes but answers a new
// generation, so a copy checked against the old one fails; Free takes the
// retired extent, and the old generation never comes back.
func TestHostRetire(t *testing.T) {
	h := newTestHost(t, HostConfig{Capacity: 4 * mib, SlabSize: mib})
	a, err := h.Alloc(64 * kib)
	if err != nil {
		t.Fatal(err)
	}
	copy(h.Bytes(a), "page")
	r := h.Retire(a)
	if r.Off != a.Off || r.Gen == a.Gen || r.Gen%2 != 1 || h.Generation(a) == a.Gen || h.Generation(r) != r.Gen {
		t.Fatalf("retired %+v from %+v: Generation %d", r, a, h.Generation(a))
	}
	if string(h.Bytes(r)[:4]) != "page" {
		t.Fatal("retiring changed the bytes")
	}
	panics.Expect(t, "Free of the extent as it was before Retire", func() { h.Free(a) })
	h.Free(r)
	for _, e := range fill(t, h, 64*kib) {
		if e.Off == a.Off && (e.Gen == a.Gen || e.Gen == r.Gen) {
			t.Fatalf("reuse %+v repeats a generation of %+v or %+v", e, a, r)
		}
	}
}

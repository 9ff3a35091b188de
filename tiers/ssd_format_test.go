//go:build linux

package tiers

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/crc32c"
)

// ssdGoldenHeaders are the headers pinned in testdata: changing how they
// encode is a format change (bump ssdSlotVersion or ssdVersion). Regenerate
// with STRATA_SSD_UPDATE_GOLDEN=1 go test ./tiers/ -run TestSSDFormatGolden.
// The version 1 slot headers in testdata are kept: TestSSDSlotHeaderV1
// reads them.
func ssdGoldenHeaders() map[string][]byte {
	sealed := ssdSlotHeader{
		State: ssdStateSealed, Slot: 7, SlotSize: 65536, Gen: 0x0102030405060708,
		Meta: PageMeta{
			Namespace: [32]byte{0: 0xaa, 31: 0xab}, Key: [32]byte{0: 0xbb, 31: 0xbc},
			Parent: [32]byte{0: 0xcc, 31: 0xcd}, HasParent: true, Depth: 42, Len: 65000,
			ChecksumAlg: ssdAlgCRC32C, Checksum: []byte{0xde, 0xad, 0xbe, 0xef},
			Created: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Cost: 1.5e12,
		},
	}
	free := ssdSlotHeader{State: ssdStateFree, Slot: 3, SlotSize: 2 << 20, Gen: 9}
	file := ssdFileHeader{Slots: 15, SlotSize: 65536, DataOff: ssdDataOff(15), Length: ssdFileLength(65536, 15),
		ID: 12, Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()}
	out := map[string][]byte{}
	b := make([]byte, ssdSlotHeaderSize)
	sealed.encode(b)
	out["ssd-slot-header-sealed-v2.hex"] = b
	b = make([]byte, ssdSlotHeaderSize)
	free.encode(b)
	out["ssd-slot-header-free-v2.hex"] = b
	b = make([]byte, ssdFileHeaderUsed)
	file.encode(b)
	out["ssd-file-header-v1.hex"] = b
	return out
}

func TestSSDFormatGolden(t *testing.T) {
	for name, b := range ssdGoldenHeaders() {
		path := filepath.Join("testdata", name)
		if os.Getenv("STRATA_SSD_UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, []byte(hex.Dump(b)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.Dump(b); got != string(want) {
			t.Errorf("%s: encoding changed (a format change needs a new version):\ngot\n%swant\n%s", name, got, want)
		}
	}
}

// TestSSDSlotHeaderV1: slot headers written before the cost hint (version
// 1, the files in testdata) still decode, with no cost hint; a version 1
// header with bytes where version 2 keeps the hint is corrupt.
func TestSSDSlotHeaderV1(t *testing.T) {
	for _, name := range []string{"ssd-slot-header-sealed-v1.hex", "ssd-slot-header-free-v1.hex"} {
		b := ssdUndump(t, filepath.Join("testdata", name))
		h, err := decodeSSDSlotHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := ssdGoldenHeaders()[strings.Replace(name, "-v1", "-v2", 1)]
		w, _ := decodeSSDSlotHeader(want)
		w.Meta.Cost = 0
		if h.State != w.State || h.Slot != w.Slot || h.Gen != w.Gen || !ssdMetaEqual(h.Meta, w.Meta) {
			t.Fatalf("%s: %+v, want %+v", name, h, w)
		}
		b[184] = 1
		ssdReCRC(b)
		if _, err := decodeSSDSlotHeader(b); !errors.Is(err, errSSDCorrupt) {
			t.Fatalf("%s with a cost hint: %v, want %v", name, err, errSSDCorrupt)
		}
	}
}

// ssdUndump reads back a hex.Dump file.
func ssdUndump(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		hexPart, _, _ := strings.Cut(line[10:], "|")
		b, err := hex.DecodeString(strings.ReplaceAll(hexPart, " ", ""))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b...)
	}
	return out
}

func TestSSDSlotHeaderDecode(t *testing.T) {
	golden := ssdGoldenHeaders()["ssd-slot-header-sealed-v2.hex"]
	h, err := decodeSSDSlotHeader(golden)
	if err != nil || h.State != ssdStateSealed || h.Meta.Len != 65000 || !h.Meta.HasParent || h.Meta.Cost != 1.5e12 {
		t.Fatalf("decode: %+v, %v", h, err)
	}
	for _, tc := range []struct {
		name string
		mut  func(b []byte)
		want error
	}{
		{"zero", func(b []byte) { clear(b) }, errSSDNoHeader},
		{"short", nil, errSSDNoHeader},
		{"magic", func(b []byte) { b[0] = 'x' }, errSSDCorrupt},
		{"version", func(b []byte) { b[4] = 3 }, errSSDVersion},
		{"version 0", func(b []byte) { b[4] = 0 }, errSSDVersion},
		{"cost hint NaN", func(b []byte) { binary.LittleEndian.PutUint32(b[184:], 0x7fc00000); ssdReCRC(b) }, errSSDCorrupt},
		{"cost hint < 0", func(b []byte) { binary.LittleEndian.PutUint32(b[184:], 0xbf800000); ssdReCRC(b) }, errSSDCorrupt},
		{"crc", func(b []byte) { b[100] ^= 1 }, errSSDCorrupt},
		{"state", func(b []byte) { b[8] = 'X'; ssdReCRC(b) }, errSSDCorrupt},
		{"size", func(b []byte) { b[6] = 1; ssdReCRC(b) }, errSSDCorrupt},
		{"reserved", func(b []byte) { b[200] = 1; ssdReCRC(b) }, errSSDCorrupt},
		{"checksum tail", func(b []byte) { b[152+4] = 1; ssdReCRC(b) }, errSSDCorrupt},
		{"checksum length", func(b []byte) { b[54] = 33; ssdReCRC(b) }, errSSDCorrupt},
		{"flags", func(b []byte) { b[52] = 2; ssdReCRC(b) }, errSSDCorrupt},
	} {
		b := bytes.Clone(golden)
		if tc.mut == nil {
			b = b[:100]
		} else {
			tc.mut(b)
		}
		if _, err := decodeSSDSlotHeader(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// ssdReCRC recomputes a slot header's CRC after a test edits it.
func ssdReCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[252:], crc32c.Checksum(b[:252]))
}

// FuzzSSDSlotHeader: decoding never panics; whatever decodes re-encodes to
// the same bytes (the encoding is canonical); and a header built from any
// fields decodes to itself.
func FuzzSSDSlotHeader(f *testing.F) {
	for _, b := range ssdGoldenHeaders() {
		if len(b) == ssdSlotHeaderSize {
			f.Add(b, uint8(0), uint32(1), int64(4096), uint64(1), int64(4096), int64(0), uint32(0), false, uint8(1), []byte{1, 2, 3, 4}, []byte("ids"), float32(0))
		}
	}
	f.Add([]byte{}, uint8(2), uint32(0), int64(-1), uint64(0), int64(-5), int64(-1), uint32(1<<31), true, uint8(2), bytes.Repeat([]byte{9}, 40), bytes.Repeat([]byte{7}, 100), float32(3e9))
	f.Fuzz(func(t *testing.T, raw []byte, state uint8, slot uint32, slotSize int64, gen uint64, length, created int64,
		depth uint32, hasParent bool, alg uint8, sum, ids []byte, cost float32) {
		// Canonical for the version this build writes (an older one
		// re-encodes as the current version).
		if h, err := decodeSSDSlotHeader(raw); err == nil && binary.LittleEndian.Uint16(raw[4:]) == ssdSlotVersion {
			b := make([]byte, ssdSlotHeaderSize)
			h.encode(b)
			if !bytes.Equal(b, raw[:ssdSlotHeaderSize]) {
				t.Fatalf("decode then encode changed the bytes:\n%x\n%x", raw[:ssdSlotHeaderSize], b)
			}
		}
		h := ssdSlotHeader{
			State:    []uint32{ssdStateFree, ssdStateReserved, ssdStateSealed}[state%3],
			Slot:     slot,
			SlotSize: slotSize,
			Gen:      gen,
			Meta:     PageMeta{Len: length, Depth: depth, HasParent: hasParent, ChecksumAlg: alg},
		}
		if cost >= 0 && !math.IsInf(float64(cost), 0) {
			h.Meta.Cost = cost
		}
		if created != 0 {
			h.Meta.Created = time.Unix(0, created).UTC()
		}
		if len(sum) > 32 {
			sum = sum[:32]
		}
		if len(sum) > 0 {
			h.Meta.Checksum = sum
		}
		ids = append(ids, make([]byte, 96)...)
		copy(h.Meta.Namespace[:], ids[0:])
		copy(h.Meta.Key[:], ids[32:])
		copy(h.Meta.Parent[:], ids[64:])
		b := make([]byte, ssdSlotHeaderSize)
		h.encode(b)
		got, err := decodeSSDSlotHeader(b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", h, err)
		}
		if got.State != h.State || got.Slot != h.Slot || got.SlotSize != h.SlotSize || got.Gen != h.Gen ||
			!ssdMetaEqual(got.Meta, h.Meta) || got.Meta.Created.IsZero() != h.Meta.Created.IsZero() {
			t.Fatalf("decode(encode(h)) = %+v, want %+v", got, h)
		}
	})
}

// FuzzSSDFileHeader: decoding never panics, and whatever decodes
// re-encodes to the same bytes and has a consistent geometry.
func FuzzSSDFileHeader(f *testing.F) {
	f.Add(ssdGoldenHeaders()["ssd-file-header-v1.hex"])
	f.Add([]byte("STRATASD"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := decodeSSDFileHeader(raw)
		if err != nil {
			return
		}
		b := make([]byte, ssdFileHeaderUsed)
		h.encode(b)
		if !bytes.Equal(b, raw[:ssdFileHeaderUsed]) {
			t.Fatalf("decode then encode changed the bytes")
		}
		if h.Length != ssdFileLength(h.SlotSize, h.Slots) || h.DataOff%ssdBlock != 0 {
			t.Fatalf("inconsistent geometry %+v", h)
		}
	})
}

func TestSSDGeometry(t *testing.T) {
	for _, tc := range []struct {
		slot, budget int64
		slots        int32
	}{
		{4096, minSSDFileSize, 1},
		{4096, minSSDFileSize - 1, 0},
		{65536, mib, 15},
		{2 << 20, 64 * mib, 31},
		{4096, 16 * 4096, 14}, // 14 headers fit one 4 KiB block
	} {
		n, length := ssdSlotsFor(tc.slot, tc.budget)
		if n != tc.slots || length > tc.budget && n > 0 {
			t.Errorf("ssdSlotsFor(%d, %d) = %d, %d; want %d slots", tc.slot, tc.budget, n, length, tc.slots)
		}
		if n > 0 {
			if more := ssdFileLength(tc.slot, n+1); more <= tc.budget {
				t.Errorf("ssdSlotsFor(%d, %d) = %d, but %d fit in %d", tc.slot, tc.budget, n, n+1, more)
			}
		}
	}
	for _, name := range []string{"class-4096-000001.slots", "class-65536-123456.slots"} {
		if _, _, ok := parseSSDFileName(name); !ok {
			t.Errorf("parseSSDFileName(%q) failed", name)
		}
	}
	for _, name := range []string{"class-4096-1.slots", "class-4096-000001.slots.tmp", "class--4096-000001.slots",
		"class-4096-000001.slotsx", "class-4096-99999999.slots", "x"} {
		if _, _, ok := parseSSDFileName(name); ok {
			t.Errorf("parseSSDFileName(%q) accepted", name)
		}
	}
}

// TestSSDSpaceOverhead prints and bounds the SSD tier's space overhead
// when a tier is filled with one page size: slot headers (with the file
// header and the header region's rounding), class rounding, and capacity
// no slot can use; and what a 4 KiB header in front of every payload would
// cost instead.
//
//	go test ./tiers/ -run TestSSDSpaceOverhead -v
func TestSSDSpaceOverhead(t *testing.T) {
	var out strings.Builder
	fmt.Fprintf(&out, "\n%-8s %-13s %9s %9s %9s %9s   %s\n", "page", "file", "headers", "rounding", "unused", "total", "4 KiB inline header")
	for _, tier := range []struct {
		capacity int64
		name     string
	}{{64 * gib, "64 GiB"}, {1 << 40, "1 TiB"}} {
		cfg, err := SSDConfig{Dir: "x", Capacity: tier.capacity}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		for _, page := range []int64{64 * kib, 256 * kib, 2 * mib, 4_497_408} {
			slot := classSize(classIndex(page))
			var pages, fileBytes int64
			for room := cfg.Capacity; ; {
				n, length := ssdSlotsFor(slot, min(room, cfg.FileSize))
				if n == 0 {
					break
				}
				pages += int64(n)
				fileBytes += length
				room -= length
			}
			stored := float64(pages * page)
			headers := float64(fileBytes-pages*slot) / stored
			rounding := float64(pages*(slot-page)) / stored
			unused := float64(cfg.Capacity-fileBytes) / stored
			inline := float64(ssdBlock+slot-page) / float64(page)
			fmt.Fprintf(&out, "%-8d %-13s %8.3f%% %8.3f%% %8.3f%% %8.3f%%   %.3f%%\n", page,
				fmt.Sprintf("%s/%dM", tier.name, cfg.FileSize>>20), 100*headers, 100*rounding, 100*unused,
				100*(headers+rounding+unused), 100*inline)
			if headers+rounding > 0.005 {
				t.Errorf("page %d: overhead %.3f%% over 0.5%%", page, 100*(headers+rounding))
			}
		}
	}
	t.Log(out.String())
}

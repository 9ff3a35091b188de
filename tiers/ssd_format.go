package tiers

// The SSD tier's on-disk format: file header version 1, slot header
// version 2 (version 1 slot headers, without the cost hint, are still
// read). All integers are little-endian.
//
// A slot file (Dir/class-<slot size>-<file id>.slots) is
//
//	[0, 4096)                 file header (below; the rest of the block zero)
//	[4096, dataOff)           slot headers, 256 bytes each, slot i at
//	                          4096 + 256*i; dataOff rounds up to 4 KiB
//	[dataOff, length)         payloads, slot i at dataOff + i*slot size
//
// so every payload starts on a 4 KiB boundary (slot sizes are the host
// tier's classes: multiples of 4 KiB). A file holds one slot size; its
// geometry is fixed when it is created and recorded in its header.
//
// File header:
//
//	off  len  field
//	  0    8  magic "STRATASD"
//	  8    2  format version (1)
//	 10    2  slot header size (256)
//	 12    4  slots
//	 16    8  slot size (payload bytes per slot)
//	 24    8  slot header region offset (4096)
//	 32    8  data region offset
//	 40    8  file length
//	 48    4  file id
//	 52    4  reserved, zero
//	 56    8  created, Unix nanoseconds
//	 64    4  CRC-32C (Castagnoli) of bytes [0, 64)
//
// Slot header:
//
//	off  len  field
//	  0    4  magic "STSL"
//	  4    2  format version (2; 1 is read too)
//	  6    2  header size (256)
//	  8    4  state, the commit marker: "FREE", "RSRV" (allocated, being
//	          written) or "SEAL" (committed: the payload verified when
//	          written and is durable); only SEAL is ever recovered
//	 12    4  slot index in the file
//	 16    8  slot size
//	 24    8  generation (of the allocation that wrote the header)
//	 32    8  page length
//	 40    8  created, Unix nanoseconds (0: unknown)
//	 48    4  depth
//	 52    1  flags: bit 0 has parent
//	 53    1  checksum algorithm: 1 CRC-32C, 2 SHA-256
//	 54    1  checksum length (4 or 32)
//	 55    1  reserved, zero
//	 56   32  namespace ID
//	 88   32  page key
//	120   32  parent key (zero without one)
//	152   32  checksum of the payload's first length bytes, left-aligned
//	          (CRC-32C big-endian, as the namespace package writes it)
//	184    4  the writer's measured recompute cost (PageSpec.CostHint),
//	          FLOPs, float32; 0: none (the namespace's profile prices the
//	          page). Version 2; zero in version 1.
//	188   64  reserved, zero
//	252    4  CRC-32C of bytes [0, 252)
//
// Why a header region rather than a header in front of each payload: the
// payload must stay 4 KiB-aligned, so an inline header costs a whole 4 KiB
// block per slot: 6.25% of a 64 KiB page and 1.6% of a 256 KiB one. Packed
// 256-byte headers cost 0.39% and 0.098% (TestSSDSpaceOverhead prints the
// figures), and recovery reads them in a few large sequential reads instead
// of one small read per slot. A header update rewrites its 4 KiB page with 15
// neighbours; they are rewritten unchanged, and a 256-byte header never
// straddles a 512-byte sector, the unit a disk writes atomically (NVMe
// guarantees at least one logical block), so a torn write can tear only the
// header being written, which its CRC then rejects.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/minio/sha256-simd"

	"github.com/stratakv/strata/internal/crc32c"
)

const (
	ssdVersion        = 1    // of the file header
	ssdSlotVersion    = 2    // of the slot headers this build writes
	ssdSlotVersionMin = 1    // the oldest slot header version it reads
	ssdBlock          = 4096 // alignment of regions and payloads
	ssdFileHeaderSize = ssdBlock
	ssdSlotHeaderSize = 256
	ssdFileHeaderUsed = 68 // bytes of the file header block in use
	ssdFileMagic      = "STRATASD"
	ssdSlotMagic      = "STSL"

	// Extent.Off is the file id shifted left by ssdOffShift plus the
	// payload's byte offset in the file, so files are at most 1 TiB and
	// ids below 2^23.
	ssdOffShift   = 40
	ssdMaxFileLen = int64(1) << ssdOffShift
	ssdMaxFileID  = 1<<(63-ssdOffShift) - 1
)

// Slot states, as written in the header: the commit marker.
const (
	ssdStateFree     uint32 = 'F' | 'R'<<8 | 'E'<<16 | 'E'<<24
	ssdStateReserved uint32 = 'R' | 'S'<<8 | 'R'<<16 | 'V'<<24
	ssdStateSealed   uint32 = 'S' | 'E'<<8 | 'A'<<16 | 'L'<<24
)

// Checksum algorithms, as PageMeta.ChecksumAlg holds them.
const (
	ssdAlgCRC32C = 1
	ssdAlgSHA256 = 2
)

// Why a slot header did not decode.
var (
	// errSSDNoHeader: all zero; the slot was never written.
	errSSDNoHeader = errors.New("no slot header")
	// errSSDVersion: a format version this build does not read.
	errSSDVersion = errors.New("unknown slot header version")
	// errSSDCorrupt: a header that was written but does not verify.
	errSSDCorrupt = errors.New("corrupt slot header")
)

// ssdSlotHeader is a decoded slot header.
type ssdSlotHeader struct {
	State    uint32 // ssdState*
	Slot     uint32
	SlotSize int64
	Gen      uint64
	Meta     PageMeta // zero unless State is sealed
}

// encode writes h into b (ssdSlotHeaderSize bytes). Meta.Checksum must be at
// most 32 bytes.
func (h *ssdSlotHeader) encode(b []byte) {
	b = b[:ssdSlotHeaderSize]
	clear(b)
	le := binary.LittleEndian
	copy(b[0:4], ssdSlotMagic)
	le.PutUint16(b[4:], ssdSlotVersion)
	le.PutUint16(b[6:], ssdSlotHeaderSize)
	le.PutUint32(b[8:], h.State)
	le.PutUint32(b[12:], h.Slot)
	le.PutUint64(b[16:], uint64(h.SlotSize))
	le.PutUint64(b[24:], h.Gen)
	m := &h.Meta
	le.PutUint64(b[32:], uint64(m.Len))
	le.PutUint64(b[40:], uint64(ssdUnixNano(m.Created)))
	le.PutUint32(b[48:], m.Depth)
	if m.HasParent {
		b[52] = 1
	}
	b[53] = m.ChecksumAlg
	b[54] = byte(len(m.Checksum))
	copy(b[56:88], m.Namespace[:])
	copy(b[88:120], m.Key[:])
	copy(b[120:152], m.Parent[:])
	copy(b[152:184], m.Checksum)
	le.PutUint32(b[184:], math.Float32bits(m.Cost))
	le.PutUint32(b[252:], crc32c.Checksum(b[:252]))
}

// decodeSSDSlotHeader parses a slot header. Its errors wrap errSSDNoHeader
// (all zero: never written), errSSDVersion or errSSDCorrupt (anything else
// that does not verify, a bad magic included). It checks the header alone, not that it
// fits its file (see ssdFile.check).
func decodeSSDSlotHeader(b []byte) (ssdSlotHeader, error) {
	var h ssdSlotHeader
	switch {
	case len(b) < ssdSlotHeaderSize || ssdAllZero(b[:ssdSlotHeaderSize]):
		return h, errSSDNoHeader
	case string(b[0:4]) != ssdSlotMagic:
		return h, fmt.Errorf("bad magic %q: %w", b[0:4], errSSDCorrupt)
	}
	le := binary.LittleEndian
	v := le.Uint16(b[4:])
	if v < ssdSlotVersionMin || v > ssdSlotVersion {
		return h, fmt.Errorf("version %d: %w", v, errSSDVersion)
	}
	if crc32c.Checksum(b[:252]) != le.Uint32(b[252:]) {
		return h, fmt.Errorf("header CRC mismatch: %w", errSSDCorrupt)
	}
	if n := le.Uint16(b[6:]); n != ssdSlotHeaderSize {
		return h, fmt.Errorf("header size %d: %w", n, errSSDCorrupt)
	}
	h.State = le.Uint32(b[8:])
	if h.State != ssdStateFree && h.State != ssdStateReserved && h.State != ssdStateSealed {
		return h, fmt.Errorf("state %#x: %w", h.State, errSSDCorrupt)
	}
	if b[52]&^1 != 0 || b[55] != 0 || b[54] > 32 || !ssdAllZero(b[188:252]) || !ssdAllZero(b[152+int(b[54]):184]) ||
		(v < 2 && !ssdAllZero(b[184:188])) {
		return h, fmt.Errorf("reserved bits set: %w", errSSDCorrupt)
	}
	cost := math.Float32frombits(le.Uint32(b[184:]))
	if !(cost >= 0) || math.IsInf(float64(cost), 0) {
		return h, fmt.Errorf("cost hint %g: %w", cost, errSSDCorrupt)
	}
	h.Slot = le.Uint32(b[12:])
	h.SlotSize = int64(le.Uint64(b[16:]))
	h.Gen = le.Uint64(b[24:])
	m := &h.Meta
	m.Len = int64(le.Uint64(b[32:]))
	if ns := int64(le.Uint64(b[40:])); ns != 0 {
		m.Created = time.Unix(0, ns).UTC()
	}
	m.Depth = le.Uint32(b[48:])
	m.HasParent = b[52]&1 != 0
	m.ChecksumAlg = b[53]
	if n := b[54]; n > 0 {
		m.Checksum = append([]byte(nil), b[152:152+int(n)]...)
	}
	m.Cost = cost
	copy(m.Namespace[:], b[56:88])
	copy(m.Key[:], b[88:120])
	copy(m.Parent[:], b[120:152])
	return h, nil
}

// ssdFileHeader is a decoded file header.
type ssdFileHeader struct {
	Slots    int32
	SlotSize int64
	DataOff  int64
	Length   int64
	ID       uint32
	Created  int64 // Unix nanoseconds
}

// encode writes h into b (at least ssdFileHeaderUsed bytes).
func (h *ssdFileHeader) encode(b []byte) {
	b = b[:ssdFileHeaderUsed]
	clear(b)
	le := binary.LittleEndian
	copy(b[0:8], ssdFileMagic)
	le.PutUint16(b[8:], ssdVersion)
	le.PutUint16(b[10:], ssdSlotHeaderSize)
	le.PutUint32(b[12:], uint32(h.Slots))
	le.PutUint64(b[16:], uint64(h.SlotSize))
	le.PutUint64(b[24:], ssdFileHeaderSize)
	le.PutUint64(b[32:], uint64(h.DataOff))
	le.PutUint64(b[40:], uint64(h.Length))
	le.PutUint32(b[48:], h.ID)
	le.PutUint64(b[56:], uint64(h.Created))
	le.PutUint32(b[64:], crc32c.Checksum(b[:64]))
}

// decodeSSDFileHeader parses and checks a file header: its CRC, version and
// that its geometry is the one ssdFileLength computes. Errors wrap
// errSSDNoHeader, errSSDVersion or errSSDCorrupt.
func decodeSSDFileHeader(b []byte) (ssdFileHeader, error) {
	var h ssdFileHeader
	if len(b) < ssdFileHeaderUsed || string(b[0:8]) != ssdFileMagic {
		return h, errSSDNoHeader
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[8:]); v != ssdVersion {
		return h, fmt.Errorf("file format version %d: %w", v, errSSDVersion)
	}
	if crc32c.Checksum(b[:64]) != le.Uint32(b[64:]) {
		return h, fmt.Errorf("file header CRC mismatch: %w", errSSDCorrupt)
	}
	h.Slots = int32(le.Uint32(b[12:]))
	h.SlotSize = int64(le.Uint64(b[16:]))
	h.DataOff = int64(le.Uint64(b[32:]))
	h.Length = int64(le.Uint64(b[40:]))
	h.ID = le.Uint32(b[48:])
	h.Created = int64(le.Uint64(b[56:]))
	switch {
	case le.Uint16(b[10:]) != ssdSlotHeaderSize || le.Uint64(b[24:]) != ssdFileHeaderSize || le.Uint32(b[52:]) != 0:
		return h, fmt.Errorf("file header layout fields: %w", errSSDCorrupt)
	case h.SlotSize <= 0 || h.SlotSize%ssdBlock != 0 || h.SlotSize >= ssdMaxFileLen ||
		h.Slots <= 0 || h.ID > ssdMaxFileID:
		return h, fmt.Errorf("file header: %d slots of %d bytes, id %d: %w", h.Slots, h.SlotSize, h.ID, errSSDCorrupt)
	case h.DataOff != ssdDataOff(h.Slots) || h.Length != ssdFileLength(h.SlotSize, h.Slots) || h.Length > ssdMaxFileLen:
		return h, fmt.Errorf("file header geometry (data at %d, length %d): %w", h.DataOff, h.Length, errSSDCorrupt)
	}
	return h, nil
}

// ssdDataOff returns where the payloads of a file of n slots start.
func ssdDataOff(n int32) int64 {
	return ssdFileHeaderSize + ssdRoundUp(int64(n)*ssdSlotHeaderSize, ssdBlock)
}

// ssdFileLength returns the length of a file of n slots of slotSize bytes.
func ssdFileLength(slotSize int64, n int32) int64 {
	return ssdDataOff(n) + int64(n)*slotSize
}

// ssdSlotsFor returns the most slots of slotSize bytes a file of at most
// budget bytes holds (0 if none) and that file's length.
func ssdSlotsFor(slotSize, budget int64) (int32, int64) {
	n := (budget - ssdFileHeaderSize) / (slotSize + ssdSlotHeaderSize)
	n = min(max(n, 0), 1<<31-1)
	for n > 0 && ssdFileLength(slotSize, int32(n)) > budget {
		n--
	}
	return int32(n), ssdFileLength(slotSize, int32(n))
}

func ssdRoundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// ssdUnixNano encodes a time as Unix nanoseconds, the zero time as 0.
func ssdUnixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func ssdAllZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ssdChecksumLen returns the checksum length of algorithm alg, 0 if unknown.
func ssdChecksumLen(alg uint8) int {
	switch alg {
	case ssdAlgCRC32C:
		return 4
	case ssdAlgSHA256:
		return 32
	}
	return 0
}

// ssdChecksum computes p's checksum under alg into dst (at least 32 bytes)
// and returns the used prefix. alg must be known.
func ssdChecksum(dst []byte, alg uint8, p []byte) []byte {
	if alg == ssdAlgSHA256 {
		s := sha256.Sum256(p)
		return dst[:copy(dst, s[:])]
	}
	binary.BigEndian.PutUint32(dst, crc32c.Checksum(p))
	return dst[:4]
}

package transport

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/stratakv/strata/internal/ntcopy"
	"github.com/stratakv/strata/proto/frame"
)

// Shm is the shm backend: a node's host arena and slot generations mapped
// into this process. Read and Write are safe for concurrent use; Close must
// not run concurrently with them.
type Shm struct {
	arena  []byte // MAP_SHARED, read-write
	gens   []byte // MAP_SHARED, read-only: 8-byte generation words
	closed atomic.Bool
}

// MapShm maps arenaSize bytes of the arena memfd read-write and genWords
// generation words of the generations memfd read-only. The fds stay the
// caller's (close them after MapShm: the mappings keep the memory).
func MapShm(arenaFD int, arenaSize int64, genFD int, genWords int64) (*Shm, error) {
	if arenaSize <= 0 || genWords <= 0 || genWords > 1<<40 {
		return nil, fmt.Errorf("mapping shm: arena %d bytes, %d generation words: %w", arenaSize, genWords, ErrOutOfRange)
	}
	arena, err := mapShared(arenaFD, arenaSize, true)
	if err != nil {
		return nil, fmt.Errorf("mapping the arena: %w", err)
	}
	gens, err := mapShared(genFD, genWords*8, false)
	if err != nil {
		unmapShared(arena)
		return nil, fmt.Errorf("mapping the generations: %w", err)
	}
	return &Shm{arena: arena, gens: gens}, nil
}

// Size is the mapped arena's length.
func (s *Shm) Size() int64 { return int64(len(s.arena)) }

// generation loads generation word idx after the copy that precedes it:
// the release store to fence keeps the copy's loads before the word's load
// on weakly ordered CPUs (on amd64 loads are not reordered anyway). An
// index outside the mapping reads as 0, which no live extent has.
func (s *Shm) generation(idx int64, fence *atomic.Uint64) uint64 {
	if idx < 0 || idx >= int64(len(s.gens)/8) {
		return 0
	}
	fence.Store(uint64(idx))
	return (*atomic.Uint64)(unsafe.Pointer(&s.gens[idx*8])).Load()
}

// window returns the arena bytes of ext, or an error if they leave it.
func (s *Shm) window(ext frame.Extent, buf int) ([]byte, error) {
	if ext.Off < 0 || ext.Len < 0 || ext.Off > int64(len(s.arena))-ext.Len || int64(buf) < ext.Len {
		return nil, fmt.Errorf("extent [%d,+%d) of a %d-byte arena, buffer %d: %w",
			ext.Off, ext.Len, len(s.arena), buf, ErrOutOfRange)
	}
	return s.arena[ext.Off : ext.Off+ext.Len], nil
}

// Read copies each op's extent into its Buf, then re-checks the extent's
// generation: OK is set only when it still equals Ext.Gen, so a copy that
// raced a reclaim is a miss. An op outside the mapping fails the batch.
func (s *Shm) Read(ctx context.Context, ops []Op) error { return s.copy(ctx, ops, false, nil) }

// Write copies each op's Buf (or its Pieces, in order) into its extent,
// which must be an open reservation's: an extent whose generation no
// longer matches is not written (ErrStale). The source must be exactly
// Ext.Len bytes.
func (s *Shm) Write(ctx context.Context, ops []Op) error { return s.copy(ctx, ops, true, nil) }

// WriteChunk is the most bytes WriteEach copies before it hands them to its
// callback: they are then still in the CPU's first-level cache.
const WriteChunk = 16 << 10

// WriteEach is Write that hands the bytes of op i's extent, just written,
// to each(i, p), at most WriteChunk bytes at a time and in order, so a
// writer checksums what it wrote while it is in cache: one pass over
// memory instead of two.
func (s *Shm) WriteEach(ctx context.Context, ops []Op, each func(i int, p []byte)) error {
	return s.copy(ctx, ops, true, each)
}

// ReadEach is Read that hands the bytes of op i's page, just copied into
// its Buf, to each(i, p), at most WriteChunk bytes at a time and in order,
// so a reader verifies what it read while it is in cache. A copy that
// raced a reclaim has been handed over too: its OK is false.
func (s *Shm) ReadEach(ctx context.Context, ops []Op, each func(i int, p []byte)) error {
	return s.copy(ctx, ops, false, each)
}

// copy runs Read's or Write's copies, stopping at the first op that fails
// and checking ctx every 16 ops; it hands what it copied to each, chunk by
// chunk, if each is not nil.
func (s *Shm) copy(ctx context.Context, ops []Op, write bool, each func(int, []byte)) error {
	if s.closed.Load() {
		return ErrClosed
	}
	var fence atomic.Uint64
	for i := range ops {
		op := &ops[i]
		op.OK = false
		win, err := s.window(op.Ext, op.dstLen())
		if err == nil && write && int64(op.dstLen()) != op.Ext.Len {
			err = fmt.Errorf("%d bytes for a %d-byte extent: %w", op.dstLen(), op.Ext.Len, ErrOutOfRange)
		}
		switch {
		case err != nil:
		case s.generation(op.Ext.GenIndex, &fence) != op.Ext.Gen:
			if write {
				err = ErrStale
			}
			// A read: already reclaimed, so not even copied.
		case write && (each != nil || op.Pieces != nil):
			src := op.Pieces
			if src == nil {
				src = [][]byte{op.Buf}
			}
			writePieces(win, src, i, each)
			op.OK = true
		case write:
			ntcopy.Copy(win, op.Buf)
			op.OK = true
		default:
			readOp(op, win, i, each)
			op.OK = s.generation(op.Ext.GenIndex, &fence) == op.Ext.Gen
		}
		if err != nil {
			return fmt.Errorf("shm %s of op %d: %w", verb(write), i, err)
		}
		if i%16 == 15 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// readOp copies win, op's extent, into op's destination (its Pieces, or
// its Buf), handing what it copied to each, chunk by chunk, if each is not
// nil.
func readOp(op *Op, win []byte, i int, each func(int, []byte)) {
	switch {
	case op.Pieces != nil:
		scatter(win, op.Pieces, func(p []byte) {
			if each != nil {
				each(i, p)
			}
		})
	case each != nil:
		dst := op.Buf[:len(win)]
		for off := 0; off < len(win); off += WriteChunk {
			end := min(len(win), off+WriteChunk)
			copy(dst[off:end], win[off:end])
			each(i, dst[off:end])
		}
	default:
		copy(op.Buf, win)
	}
}

// scatter copies src into pieces in order, at most WriteChunk bytes at a
// time, handing each chunk just written to each.
func scatter(src []byte, pieces [][]byte, each func([]byte)) {
	for _, p := range pieces {
		if len(src) == 0 {
			return
		}
		p = p[:min(len(p), len(src))]
		for off := 0; off < len(p); off += WriteChunk {
			end := min(len(p), off+WriteChunk)
			copy(p[off:end], src[off:end])
			each(p[off:end])
		}
		src = src[len(p):]
	}
}

// writePieces copies pieces, in order, into win (exactly as long as they
// are together) with non-temporal stores, at most WriteChunk bytes at a
// time, handing each source chunk just copied to each(i, chunk) if each
// is not nil: a writer checksums the bytes while they are in cache, and a
// page in pieces (an engine's K and V halves) goes into the arena without
// being gathered first.
func writePieces(win []byte, pieces [][]byte, i int, each func(int, []byte)) {
	for _, p := range pieces {
		for off := 0; off < len(p); off += WriteChunk {
			end := min(len(p), off+WriteChunk)
			ntcopy.Copy(win[:end-off], p[off:end])
			if each != nil {
				each(i, p[off:end])
			}
			win = win[end-off:]
		}
	}
}

// Close unmaps the arena and generations. A second Close returns ErrClosed.
func (s *Shm) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	return joinErr(unmapShared(s.arena), unmapShared(s.gens))
}

func verb(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

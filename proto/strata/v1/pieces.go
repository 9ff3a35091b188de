package stratav1

import (
	"errors"
	"io"

	"google.golang.org/grpc/mem"
)

// PieceReader reads a protobuf message held in the buffers of a
// mem.BufferSlice without joining them, so that the data codecs of the
// client and the server can leave page bytes where gRPC received them.
type PieceReader struct {
	b   mem.BufferSlice
	i   int // current buffer
	off int // offset in it
	n   int // bytes consumed
}

// NewPieceReader reads b from its start.
func NewPieceReader(b mem.BufferSlice) *PieceReader { return &PieceReader{b: b} }

func (r *PieceReader) cur() []byte {
	for r.i < len(r.b) {
		if d := r.b[r.i].ReadOnlyData(); r.off < len(d) {
			return d[r.off:]
		}
		r.i, r.off = r.i+1, 0
	}
	return nil
}

// Done reports whether every byte has been read.
func (r *PieceReader) Done() bool { return len(r.cur()) == 0 }

// Left is the number of bytes not yet read.
func (r *PieceReader) Left() int { return r.b.Len() - r.n }

// Varint reads one base-128 varint.
func (r *PieceReader) Varint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c := r.cur()
		if len(c) == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		r.off++
		r.n++
		v |= uint64(c[0]&0x7f) << shift
		if c[0] < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint overflow")
}

// Take passes the next size bytes to fn, one view per buffer they span; it
// fails with io.ErrUnexpectedEOF when fewer are left.
func (r *PieceReader) Take(size int, fn func([]byte)) error {
	for size > 0 {
		c := r.cur()
		if len(c) == 0 {
			return io.ErrUnexpectedEOF
		}
		k := min(size, len(c))
		fn(c[:k:k])
		r.off += k
		r.n += k
		size -= k
	}
	return nil
}

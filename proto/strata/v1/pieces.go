package stratav1

import (
	"errors"
	"io"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
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

// AppendData finishes a message whose other fields are in prefix with a
// bytes field num holding data. Data under gRPC's pooling threshold is
// copied after prefix; larger data is referenced, not copied, and
// released receives one value when the transport is done with it (the
// sender must keep the bytes unchanged until then). referenced says which.
func AppendData(prefix []byte, num protowire.Number, data []byte, released chan struct{}) (b mem.BufferSlice, referenced bool) {
	if len(data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(prefix)}, false
	}
	prefix = protowire.AppendTag(prefix, num, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(len(data)))
	data = data[:len(data):len(data)]
	if mem.IsBelowBufferPoolingThreshold(len(data)) {
		return mem.BufferSlice{mem.SliceBuffer(append(prefix, data...))}, false
	}
	return mem.BufferSlice{mem.SliceBuffer(prefix), mem.NewBuffer(&data, releasePool(released))}, true
}

// releasePool is the "pool" of a referenced chunk: gRPC puts the chunk
// back when the last reference to it is dropped, which is the signal that
// the bytes may change (a page unpinned, a caller's buffer reused).
type releasePool chan struct{}

func (r releasePool) Get(n int) *[]byte { b := make([]byte, n); return &b }

func (r releasePool) Put(*[]byte) { r <- struct{}{} }

// Package splitbuf cuts a message into the buffers gRPC might hand it over
// in, for tests of codecs that read messages in pieces.
package splitbuf

import (
	"bytes"
	"math/rand/v2"

	"google.golang.org/grpc/mem"
)

// Split cuts b into a BufferSlice of random-length buffers, as gRPC hands a
// message over (one buffer per HTTP/2 frame, or parts of them): mostly
// short ones, a quarter up to 20,000 bytes. The buffers are copies of b's
// bytes.
func Split(r *rand.Rand, b []byte) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(40))
		if r.IntN(4) == 0 {
			n = min(len(b), 1+r.IntN(20000))
		}
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:n])))
		b = b[n:]
	}
	return out
}

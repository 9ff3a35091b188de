package client

import (
	"bytes"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestPageSumInPieces: a checksum computed piece by piece, as a put
// through shared memory computes it while copying, is the algorithm's
// checksum of the whole page, for every way of cutting the page.
func TestPageSumInPieces(t *testing.T) {
	page := make([]byte, 100_000)
	for i := range page {
		page[i] = byte(i*31 + i>>9)
	}
	for _, alg := range []namespace.Checksum{namespace.CRC32C, namespace.SHA256} {
		want := alg.Sum(page)
		for _, piece := range []int{1, 767, 768, 16 << 10, len(page)} {
			s := newPageSum(alg)
			for off := 0; off < len(page); off += piece {
				s.write(page[off:min(len(page), off+piece)])
			}
			if got := s.sum(); !bytes.Equal(got, want) {
				t.Errorf("%s in pieces of %d: %x, want %x", alg, piece, got, want)
			}
		}
	}
}

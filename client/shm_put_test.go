package client

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
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

// TestHelloVersions: a node that refuses the newest version (an older
// node) is dialed again with each older one until it takes one, which the
// session keeps for its next dials; other failures and the oldest version
// refused end the tries.
func TestHelloVersions(t *testing.T) {
	refuse := func(upTo uint16) (func(uint16) error, *[]uint16) {
		var tried []uint16
		return func(v uint16) error {
			tried = append(tried, v)
			if v > upTo {
				return fmt.Errorf("hello: %w", ErrVersion)
			}
			return nil
		}, &tried
	}
	var v atomic.Uint32
	const older = frame.ProtocolVersion - 2
	dial, tried := refuse(older)
	if err := helloVersions(&v, dial); err != nil || v.Load() != older ||
		!slices.Equal(*tried, []uint16{frame.ProtocolVersion, frame.ProtocolVersion - 1, older}) {
		t.Fatalf("a node of %d: %v, version %d, tried %v", older, err, v.Load(), *tried)
	}
	dial, tried = refuse(older)
	if err := helloVersions(&v, dial); err != nil || !slices.Equal(*tried, []uint16{older}) {
		t.Fatalf("the next dial: %v, tried %v", err, *tried)
	}
	v.Store(0)
	dial, tried = refuse(1)
	if err := helloVersions(&v, dial); !errors.Is(err, ErrVersion) || len(*tried) != frame.ProtocolVersion-frame.MinProtocolVersion+1 {
		t.Fatalf("a node of no version of ours: %v, tried %v", err, *tried)
	}
	boom := errors.New("refused")
	v.Store(0)
	if err := helloVersions(&v, func(uint16) error { return boom }); !errors.Is(err, boom) || v.Load() != 0 {
		t.Fatalf("another failure: %v, version %d", err, v.Load())
	}
}

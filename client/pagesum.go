package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/stratakv/strata/internal/crc32c"
	"github.com/stratakv/strata/namespace"
)

// pageSum is a page's checksum under its namespace's algorithm, computed
// piece by piece: namespace.Checksum.Sum of the pieces put together.
type pageSum struct {
	crc uint32
	h   hash.Hash // SHA-256; nil: CRC-32C
}

func newPageSum(alg namespace.Checksum) pageSum {
	if alg == namespace.SHA256 {
		return pageSum{h: sha256.New()}
	}
	return pageSum{}
}

func (s *pageSum) write(p []byte) {
	if s.h != nil {
		s.h.Write(p)
		return
	}
	s.crc = crc32c.Update(s.crc, p)
}

// is reports whether the bytes written so far have checksum want.
func (s *pageSum) is(want []byte) bool {
	if s.h != nil {
		return bytes.Equal(s.h.Sum(nil), want)
	}
	return len(want) == 4 && binary.BigEndian.Uint32(want) == s.crc
}

func (s *pageSum) sum() []byte {
	if s.h != nil {
		return s.h.Sum(nil)
	}
	return binary.BigEndian.AppendUint32(make([]byte, 0, 4), s.crc)
}

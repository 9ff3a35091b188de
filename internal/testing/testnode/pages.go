package testnode

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// PageOf is the bytes a test writes as the page of key k, size bytes long:
// derived from the key (a SHA-256 chain), so that a reader can tell any
// page served is exactly the one written for its key.
func PageOf(k namespace.Key, size int) []byte {
	out := make([]byte, 0, size)
	for b := k; len(out) < size; {
		b = sha256.Sum256(b[:])
		out = append(out, b[:]...)
	}
	return out[:size]
}

// PagesOf is PageOf of each of keys.
func PagesOf(keys []namespace.Key, size int) [][]byte {
	data := make([][]byte, len(keys))
	for i, k := range keys {
		data[i] = PageOf(k, size)
	}
	return data
}

// CountExact counts the pages of keys that a Get found (found) and read
// into bufs, failing tb on one whose bytes are not PageOf its key.
func CountExact(tb testing.TB, keys []namespace.Key, found []bool, bufs [][]byte) int {
	tb.Helper()
	n := 0
	for i, k := range keys {
		if found[i] {
			if !bytes.Equal(bufs[i], PageOf(k, len(bufs[i]))) {
				tb.Fatalf("page %x served with wrong bytes", k[:6])
			}
			n++
		}
	}
	return n
}

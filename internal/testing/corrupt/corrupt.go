// Package corrupt damages files on purpose, for tests of what recovery and
// verification make of them.
package corrupt

import (
	"os"
	"testing"
)

// Flip XORs the byte at off of the file at path with mask (not 0), failing
// tb if the file cannot be read or written there.
func Flip(tb testing.TB, path string, off int64, mask byte) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		tb.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b, off); err != nil {
		tb.Fatal(err)
	}
}

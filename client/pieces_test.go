package client

import (
	"bytes"
	"testing"
)

// TestCutPieces: cutPieces gives the bytes [off, end) of the page its
// pieces make, across piece boundaries and empty pieces, nil for nil.
func TestCutPieces(t *testing.T) {
	page := []byte("abcdefghijklmnopqrstuvwxyz")
	pieces := [][]byte{page[:3], nil, page[3:10], page[10:11], page[11:]}
	for off := 0; off <= len(page); off++ {
		for end := off; end <= len(page); end++ {
			got := cutPieces(pieces, off, end)
			if !bytes.Equal(bytes.Join(got, nil), page[off:end]) {
				t.Fatalf("[%d, %d): %q", off, end, bytes.Join(got, nil))
			}
			for _, p := range got {
				if len(p) == 0 {
					t.Fatalf("[%d, %d): an empty piece", off, end)
				}
			}
		}
	}
	if cutPieces(nil, 0, 5) != nil {
		t.Fatal("nil pieces cut to something")
	}
}

package client

import (
	"testing"

	"github.com/stratakv/strata/namespace"
)

// TestChainDepths: every page of a sequence learns the depth of the
// deepest page put with it, across a second sequence sharing its prefix,
// without the caller's pages changing.
func TestChainDepths(t *testing.T) {
	keys := make([]namespace.Key, 7)
	for i := range keys {
		keys[i][0] = byte(i + 1)
	}
	data := make([][]byte, len(keys))
	// keys 0..4 are one sequence; 5 and 6 branch off key 1 at depths 2, 3.
	pages := append(ChainPages(keys[:5], data[:5]),
		Page{Key: keys[5], Parent: keys[1], HasParent: true, Depth: 2},
		Page{Key: keys[6], Parent: keys[5], HasParent: true, Depth: 3})
	got := withChainDepths(pages)
	want := []uint32{4, 4, 4, 4, 0, 3, 0}
	for i, p := range got {
		if p.ChainDepth != want[i] {
			t.Errorf("page %d (depth %d): chain depth %d, want %d", i, p.Depth, p.ChainDepth, want[i])
		}
	}
	for i, p := range pages {
		if p.ChainDepth != 0 {
			t.Fatalf("the caller's page %d was changed (chain depth %d)", i, p.ChainDepth)
		}
	}
	// A depth the caller set is kept when it is deeper.
	pages[4].ChainDepth = 9
	if got := withChainDepths(pages); got[0].ChainDepth != 9 || got[4].ChainDepth != 9 {
		t.Fatalf("chain depths %d, %d with the last page's set to 9", got[0].ChainDepth, got[4].ChainDepth)
	}
	// One sequence in order takes the path without an index; a depth set
	// on a middle page reaches the pages before it.
	seq := ChainPages(keys[:5], data[:5])
	seq[2].ChainDepth = 7
	got = withChainDepths(seq)
	for i, want := range []uint32{7, 7, 7, 4, 0} {
		if got[i].ChainDepth != want {
			t.Errorf("sequence page %d: chain depth %d, want %d", i, got[i].ChainDepth, want)
		}
	}
	one := pages[:1]
	if got := withChainDepths(one); &got[0] != &one[0] {
		t.Fatal("a single page was copied")
	}
}

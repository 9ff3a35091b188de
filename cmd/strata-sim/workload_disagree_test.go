package main

import (
	"fmt"
	"testing"
)

// TestDisagreeingWorkloads checks what defines each workload of
// workload_disagree.go, on three seeds (TestWorkloads checks that they are
// deterministic and well formed): in recency, a page's chance of another
// use falls with the uses it has had (so counting reuse misleads), where
// conversation's does not; scan is scan-heavy (more than half of all page
// references are the one use of a single-use page) over a hot set (pages
// used ten times or more are under 1% of the pages and take a quarter of
// the reuses).
func TestDisagreeingWorkloads(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			recency := genTrace(t, genRecency, seed)
			again := reuseAfter(recency, 10)
			t.Logf("recency: P(used again | k uses), k = 1 … 10+: %.2f", again[1:])
			if again[2]-again[10] < 0.15 {
				t.Errorf("recency: a page used twice is used again with p=%.2f, one used 10+ times p=%.2f: want a fall of 0.15 or more", again[2], again[10])
			}
			conv := reuseAfter(genTrace(t, genConversation, seed), 10)
			if conv[2] >= conv[10] {
				t.Errorf("conversation: p=%.2f after 2 uses, %.2f after 10+: the contrast is gone", conv[2], conv[10])
			}

			scan := genTrace(t, genScan, seed)
			once := scanShare(scan)
			pages, reuses := hotShare(scan, 10)
			t.Logf("scan: %.2f of page references single-use; pages used 10+ times: %.3f of pages, %.2f of reuses", once, pages, reuses)
			if once <= 0.5 {
				t.Errorf("scan: %.2f of page references are single-use pages: want more than half", once)
			}
			if pages >= 0.01 || reuses < 0.25 {
				t.Errorf("scan: the hot set is %.3f of pages and %.2f of reuses: want < 0.01 and >= 0.25", pages, reuses)
			}
		})
	}
}

func genTrace(t *testing.T, gen func(uint64) []record, seed uint64) *trace {
	t.Helper()
	tr, err := recordsTrace(gen(seed), genBlockTokens, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// reuseAfter is, for k = 1 … maxK, the share of pages used k times so far
// that are used again (k = maxK counts maxK uses or more).
func reuseAfter(tr *trace, maxK int) []float64 {
	again, seen := make([]float64, maxK+1), make([]float64, maxK+1)
	for i := range tr.blocks {
		u := len(tr.blocks[i].uses)
		for k := 1; k <= u; k++ {
			seen[min(k, maxK)]++
			if k < u {
				again[min(k, maxK)]++
			}
		}
	}
	for k := range again {
		if seen[k] > 0 {
			again[k] /= seen[k]
		}
	}
	return again
}

// scanShare is the share of the trace's page references that are the one
// use of a single-use page.
func scanShare(tr *trace) float64 {
	once, refs := 0, 0
	for i := range tr.blocks {
		refs += len(tr.blocks[i].uses)
		if len(tr.blocks[i].uses) == 1 {
			once++
		}
	}
	return float64(once) / float64(refs)
}

// hotShare is the share of distinct pages used at least n times, and
// their share of the reuses (uses after the first).
func hotShare(tr *trace, n int) (pages, reuses float64) {
	hot, hotReuse, reuse := 0, 0, 0
	for i := range tr.blocks {
		u := len(tr.blocks[i].uses)
		reuse += u - 1
		if u >= n {
			hot++
			hotReuse += u - 1
		}
	}
	return float64(hot) / float64(len(tr.blocks)), float64(hotReuse) / float64(reuse)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONSlice runs the command's path end to end on a small trace: --slice
// keeps the first requests, --json prints figures that add up.
func TestJSONSlice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(tinyTrace+tinyTrace), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"--trace", path, "--slice", "4", "--json", "--nodes", "1",
		"--sizes", "50,200", "--policies", "lru,ours-node"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep jsonReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if rep.Requests != 4 || rep.Slice != 4 || rep.Blocks != 4 || len(rep.Rows) != 4 {
		t.Fatalf("requests %d slice %d blocks %d rows %d; want 4, 4, 4, 4", rep.Requests, rep.Slice, rep.Blocks, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		// Requests 0-3 of the doubled tiny trace: 1100+600+1536+1100 tokens.
		if r.Tokens != 4336 || r.HitTokens > r.Tokens || r.FLOPsSaved > r.FLOPsTotal || r.FLOPsTotal <= 0 {
			t.Fatalf("%+v", r)
		}
		if got := r.FLOPsSaved / r.FLOPsTotal; got != r.SavedFrac {
			t.Fatalf("%s at %g%%: saved fraction %g, figures give %g", r.Policy, r.SizePct, r.SavedFrac, got)
		}
		if r.Policy == "lru" && r.VsLRU != nil {
			t.Fatalf("lru compared with itself: %v", *r.VsLRU)
		}
	}
	// At 200% nothing is evicted (pages are stored whole: the four blocks
	// take four pages of 512 tokens, where 100% of their 1,188 distinct
	// tokens holds two): the second request hits block 1 (512 tokens), the
	// third and fourth blocks 1, 2, 3 (512 + 512 + 76 tokens: block 3 holds
	// what the first request had of it).
	for _, r := range rep.Rows[2:] {
		if r.SizePct != 200 || r.HitTokens != 512+2*1100 {
			t.Fatalf("at 200%%: %+v, want %d hit tokens", r, 512+2*1100)
		}
	}
	if r := rep.Rows[3]; r.VsLRU == nil || *r.VsLRU != 0 {
		t.Fatalf("%s at 200%%: vs_lru %v, want 0 (both hit everything)", r.Policy, r.VsLRU)
	}
	if _, err := parseFlags([]string{"--trace", path, "--slice", "-1"}); err == nil || !strings.Contains(err.Error(), "slice") {
		t.Fatalf("--slice -1: %v", err)
	}
}

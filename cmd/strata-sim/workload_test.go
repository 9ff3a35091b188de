package main

import (
	"bytes"
	"slices"
	"testing"
)

// TestWorkloads: each generator is deterministic in its seed, emits a
// valid Mooncake-format trace (timestamps in order, input lengths that
// match the blocks, hash ids that name one prefix each: parseTrace refuses
// a hash id with two parents), and the copy --write-trace writes replays
// as the generated trace does.
func TestWorkloads(t *testing.T) {
	for name, gen := range workloads {
		t.Run(name, func(t *testing.T) {
			a, b, other := gen(1), gen(1), gen(2)
			if len(a) != conversationParams.requests && len(a) != agentParams.requests {
				t.Fatalf("%d requests", len(a))
			}
			if !slices.EqualFunc(a, b, func(x, y record) bool {
				return x.Timestamp == y.Timestamp && x.InputLength == y.InputLength && slices.Equal(x.HashIDs, y.HashIDs)
			}) {
				t.Fatal("the same seed generated two traces")
			}
			if slices.EqualFunc(a, other, func(x, y record) bool { return slices.Equal(x.HashIDs, y.HashIDs) }) {
				t.Fatal("seeds 1 and 2 generated the same trace")
			}
			for i, r := range a {
				if i > 0 && r.Timestamp < a[i-1].Timestamp {
					t.Fatalf("request %d at %d ms, before request %d at %d ms", i, r.Timestamp, i-1, a[i-1].Timestamp)
				}
				if want := (r.InputLength + genBlockTokens - 1) / genBlockTokens; len(r.HashIDs) != want || r.OutputLength <= 0 {
					t.Fatalf("request %d: %d tokens in %d blocks (want %d), output %d", i, r.InputLength, len(r.HashIDs), want, r.OutputLength)
				}
			}
			tr, err := recordsTrace(a, genBlockTokens, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := writeRecords(&buf, a); err != nil {
				t.Fatal(err)
			}
			again, err := parseTrace(&buf, genBlockTokens, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.reqs) != len(tr.reqs) || len(again.blocks) != len(tr.blocks) {
				t.Fatalf("written and read back: %d requests, %d blocks; generated %d, %d",
					len(again.reqs), len(again.blocks), len(tr.reqs), len(tr.blocks))
			}
			reused := 0
			for i := range tr.blocks {
				if len(tr.blocks[i].uses) > 1 {
					reused++
				}
			}
			if reused == 0 || reused == len(tr.blocks) {
				t.Fatalf("%d of %d blocks reused: no caching question", reused, len(tr.blocks))
			}
		})
	}
	if _, ok, err := genSource("gen:nope"); !ok || err == nil {
		t.Error("an unknown generator is not an error")
	}
	if _, ok, err := genSource("gen:agent:x"); !ok || err == nil {
		t.Error("a bad seed is not an error")
	}
	if _, ok, _ := genSource("trace.jsonl"); ok {
		t.Error("a file name taken for a generator")
	}
}

package main

import (
	"strings"
	"testing"
)

const tinyTrace = `{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 5, "input_length": 600, "output_length": 5, "hash_ids": [1, 4]}

{"timestamp": 9, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}
`

func TestParseTrace(t *testing.T) {
	tr, err := parseTrace(strings.NewReader(tinyTrace), 512, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.reqs) != 3 || len(tr.blocks) != 4 {
		t.Fatalf("%d requests, %d blocks; want 3, 4", len(tr.reqs), len(tr.blocks))
	}
	b := tr.blocks
	if b[0].parent != -1 || b[1].parent != 0 || b[2].parent != 1 || b[3].parent != 0 {
		t.Fatalf("parents %d %d %d %d", b[0].parent, b[1].parent, b[2].parent, b[3].parent)
	}
	if b[2].depth != 2 || b[2].tokens != 1100-1024 || b[3].tokens != 600-512 {
		t.Fatalf("depth %d tokens %d/%d", b[2].depth, b[2].tokens, b[3].tokens)
	}
	if len(b[0].children) != 2 || len(b[0].uses) != 3 || b[1].uses[1] != 2 {
		t.Fatalf("children %v uses %v %v", b[0].children, b[0].uses, b[1].uses)
	}
	// Keys chain: same prefix, same key; different prefixes differ.
	again, _ := parseTrace(strings.NewReader(tinyTrace), 512, 1, 0)
	if again.blocks[2].key != b[2].key || b[1].key == b[3].key {
		t.Fatal("block keys are not a deterministic prefix chain")
	}
	sliced, err := parseTrace(strings.NewReader(tinyTrace), 512, 1, 2)
	if err != nil || len(sliced.reqs) != 2 || len(sliced.blocks) != 4 {
		t.Fatalf("first 2 requests: %d requests, %d blocks, %v", len(sliced.reqs), len(sliced.blocks), err)
	}
	sampled, err := parseTrace(strings.NewReader(tinyTrace), 512, 2, 0)
	if err != nil || len(sampled.reqs) != 1 {
		t.Fatalf("every 2nd line: %d requests, %v", len(sampled.reqs), err)
	}
}

func TestParseTraceErrors(t *testing.T) {
	for name, in := range map[string]string{
		"two parents": `{"input_length": 1024, "hash_ids": [1, 2]}
{"input_length": 1024, "hash_ids": [3, 2]}`,
		"not json": `{"input_length": `,
		"empty":    ``,
	} {
		if _, err := parseTrace(strings.NewReader(in), 512, 1, 0); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--trace", "x", "--capacity-ratios", "1:1:2:4", "--sizes", "5,10", "--policies", "lru,ours-node", "--history", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Ratios) != 4 || cfg.Ratios[3] != 4 || len(cfg.Sizes) != 2 || len(cfg.Policies) != 2 || cfg.Profile.Params != 70e9 || cfg.History != 2 {
		t.Fatalf("%+v", cfg)
	}
	for _, args := range [][]string{
		{},
		{"--trace", "x", "--capacity-ratios", "1:2"},
		{"--trace", "x", "--sizes", "5,-1"},
		{"--trace", "x", "--policies", "nope"},
		{"--trace", "x", "--nodes", "0"},
		{"--trace", "x", "--layers", "-3"},
		{"--trace", "x", "--history", "-1"},
		{"--trace", "x", "--history", "NaN"},
		{"--trace", "x", "--half-life", "NaN"},
		{"--trace", "x", "--half-life", "Inf"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

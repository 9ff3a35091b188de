package events

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The reference encoding: vLLM's event classes as structs the msgpack
// library encodes by reflection (what the publisher sent before its
// hand-written encoder), with integers in their shortest form.

type refBatch struct {
	_msgpack struct{} `msgpack:",as_array"`
	TS       float64
	Events   []any
}

type refStored struct {
	Type            string               `msgpack:"type"`
	BlockHashes     [][]byte             `msgpack:"block_hashes"`
	ParentBlockHash []byte               `msgpack:"parent_block_hash"`
	TokenIDs        []uint32             `msgpack:"token_ids"`
	BlockSize       uint32               `msgpack:"block_size"`
	LoraID          *int                 `msgpack:"lora_id"`
	Medium          string               `msgpack:"medium"`
	LoraName        *string              `msgpack:"lora_name"`
	ExtraKeys       []msgpack.RawMessage `msgpack:"extra_keys,omitempty"`
	Ownership       string               `msgpack:"ownership,omitempty"`
}

type refRemoved struct {
	Type        string   `msgpack:"type"`
	BlockHashes [][]byte `msgpack:"block_hashes"`
	Medium      string   `msgpack:"medium"`
	Ownership   string   `msgpack:"ownership,omitempty"`
}

type refCleared struct {
	Type string `msgpack:"type"`
}

func refEncode(t testing.TB, ts time.Time, events []Event) []byte {
	b := refBatch{TS: float64(ts.UnixNano()) / 1e9, Events: []any{}}
	for _, e := range events {
		if e.check() != nil {
			continue
		}
		switch e.Kind {
		case Stored:
			s := &refStored{Type: "BlockStored", BlockHashes: [][]byte{e.Block}, ParentBlockHash: e.Parent,
				TokenIDs: e.Tokens, BlockSize: e.BlockSize, Medium: MediumStorage, Ownership: ownership(e.Tier)}
			if s.TokenIDs == nil {
				s.TokenIDs = []uint32{}
			}
			if e.LoraName != "" {
				s.LoraName = &e.LoraName
			}
			if e.ExtraKeys != nil {
				s.ExtraKeys = []msgpack.RawMessage{e.ExtraKeys}
			}
			b.Events = append(b.Events, s)
		case Removed:
			b.Events = append(b.Events, &refRemoved{Type: "BlockRemoved", BlockHashes: [][]byte{e.Block},
				Medium: MediumStorage, Ownership: ownership(e.Tier)})
		case Cleared:
			b.Events = append(b.Events, &refCleared{Type: "AllBlocksCleared"})
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEncodeMatchesReflection: the hand-written encoder writes the bytes
// the library's reflection writes for vLLM's classes, over random batches
// (every kind, with and without parent, tokens, LoRA, extra keys, tier,
// bad extra keys left out), one encoder reused across them.
func TestEncodeMatchesReflection(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 43))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	enc := newBatchEncoder()
	for round := range 500 {
		var evs []Event
		for range rng.IntN(20) {
			e := Event{Namespace: "ns", Kind: Kind(1 + rng.IntN(3)), Block: bytesOf(32)}
			if rng.IntN(2) == 0 {
				e.Parent = bytesOf(32)
			}
			for range rng.IntN(40) {
				e.Tokens = append(e.Tokens, rng.Uint32N(1<<uint(1+rng.IntN(31))))
			}
			e.BlockSize = rng.Uint32N(1 << uint(1+rng.IntN(31)))
			if rng.IntN(2) == 0 {
				e.LoraName = string(bytesOf(rng.IntN(300)))
			}
			switch rng.IntN(4) {
			case 0:
				e.ExtraKeys = []byte{0x92, 0x01, 0xa1, 'x'} // [1, "x"]
			case 1:
				e.ExtraKeys = []byte{0x92, 0x01} // truncated: left out
			}
			e.Tier = []string{"", "host", "ssd", "gpu"}[rng.IntN(4)]
			evs = append(evs, e)
		}
		ts := time.Unix(int64(round), int64(rng.IntN(1e9)))
		got, bad, err := enc.encode(ts, evs)
		if err != nil {
			t.Fatal(err)
		}
		if want := refEncode(t, ts, evs); !bytes.Equal(got, want) {
			t.Fatalf("round %d: encoded\n%x\nwant\n%x", round, got, want)
		}
		nbad := 0
		for _, e := range evs {
			if e.check() != nil {
				nbad++
			}
		}
		if bad != nbad {
			t.Fatalf("round %d: %d bad, want %d", round, bad, nbad)
		}
		if _, err := DecodeBatch(got); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// BenchmarkEncode is the encoder's cost per event of a page's shape (a
// 32-byte key and parent, 16 tokens), in batches of 100, beside the
// library's reflection over vLLM's classes (the encoder before).
func BenchmarkEncode(b *testing.B) {
	evs := make([]Event, 100)
	for i := range evs {
		evs[i] = Event{Namespace: "ns", Kind: Stored, Block: make([]byte, 32), Parent: make([]byte, 32),
			Tokens: make([]uint32, 16), BlockSize: 16, Tier: "host"}
	}
	b.Run("encoder", func(b *testing.B) { benchEncoder(b, evs) })
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			refEncode(b, time.Unix(1, 0), evs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
	// A node's batch under strata-load's puts: 1,024 events, each put's
	// BlockStored (no tokens) and its trim's BlockRemoved, 150 KB.
	puts := make([]Event, 1024)
	for i := range puts {
		puts[i] = Event{Namespace: "ns", Kind: Stored, Block: make([]byte, 32), Parent: make([]byte, 32), BlockSize: 16, Tier: "host"}
		if i%2 == 1 {
			puts[i] = Event{Namespace: "ns", Kind: Removed, Block: make([]byte, 32), Tier: "host"}
		}
	}
	b.Run("encoder/puts", func(b *testing.B) { benchEncoder(b, puts) })
}

// benchEncoder encodes evs as one batch b.N times.
func benchEncoder(b *testing.B, evs []Event) {
	enc := newBatchEncoder()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := enc.encode(time.Unix(1, 0), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

package events

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Kind is what an Event reports.
type Kind uint8

// Event kinds, vLLM's three.
const (
	// Stored: a block became available (vLLM's BlockStored).
	Stored Kind = iota + 1
	// Removed: a block is no longer available (BlockRemoved).
	Removed
	// Cleared: every block of the topic's namespace is gone
	// (AllBlocksCleared).
	Cleared
)

// MediumStorage is the medium of every block strata publishes: vLLM's
// MEDIUM_STORAGE, the store beneath the engines' GPU and CPU caches. The
// tier a block is in rides in Ownership ("strata/host", "strata/ssd", ...),
// vLLM's field for the secondary offloading tier that generated an event.
const MediumStorage = "STORAGE"

// Event is one change a Publisher sends: a block stored or removed, or a
// namespace cleared.
type Event struct {
	// Namespace names the stream's topic the event goes under (the topic
	// is "kv@<node>.<incarnation>@<namespace>").
	Namespace string
	Kind      Kind
	// Block is the block's hash (Stored, Removed).
	Block []byte
	// Parent is the hash of the block before it in its sequence; nil for
	// the first (Stored).
	Parent []byte
	// Tokens are the block's token ids as the put carried them; nil when
	// it carried none (Stored).
	Tokens []uint32
	// BlockSize is the tokens a block holds (Stored).
	BlockSize uint32
	// LoraName is the LoRA adapter the block was computed with; "" none
	// (Stored).
	LoraName string
	// ExtraKeys is the block's extra keys as the engine gave them: one
	// msgpack value (an array, vLLM's tuple) or nil (Stored).
	ExtraKeys []byte
	// Tier is the store's tier the block is in (Stored) or left from
	// (Removed), sent as Ownership "strata/<tier>".
	Tier string
	// Incarnation, when not zero, sends a Cleared under that incarnation's
	// topic instead of the publisher's: a restarted node clears what its
	// previous incarnation published.
	Incarnation uint64
	// Node, when not empty, sends a Cleared under that node's topic (with
	// Incarnation) instead of the publisher's: a survivor clears the
	// stream of a node that left the cluster.
	Node string

	mark chan<- uint64 // a Mark, not an event: its place in the stream goes here
}

// The wire types: vLLM's msgspec structs as the installed wheel encodes
// them (vllm/distributed/kv_events.py). KVEventBatch is array-like: [ts,
// events] (data_parallel_rank omitted, its default); each event is a map
// tagged by "type" with its class name, defaults omitted, the fields
// without a default always present (nil when None).

type batch struct {
	_msgpack struct{} `msgpack:",as_array"`
	TS       float64
	Events   []any
}

type blockStored struct {
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

type blockRemoved struct {
	Type        string   `msgpack:"type"`
	BlockHashes [][]byte `msgpack:"block_hashes"`
	Medium      string   `msgpack:"medium"`
	Ownership   string   `msgpack:"ownership,omitempty"`
}

type allBlocksCleared struct {
	Type string `msgpack:"type"`
}

// wire is e as vLLM's event struct.
func (e *Event) wire() (any, error) {
	switch e.Kind {
	case Stored:
		s := &blockStored{Type: "BlockStored", BlockHashes: [][]byte{e.Block}, ParentBlockHash: e.Parent,
			TokenIDs: e.Tokens, BlockSize: e.BlockSize, Medium: MediumStorage, Ownership: ownership(e.Tier)}
		if s.TokenIDs == nil {
			s.TokenIDs = []uint32{} // list[int], never None
		}
		if e.LoraName != "" {
			s.LoraName = &e.LoraName
		}
		if e.ExtraKeys != nil {
			if err := checkValue(e.ExtraKeys); err != nil {
				return nil, fmt.Errorf("extra keys: %w", err)
			}
			s.ExtraKeys = []msgpack.RawMessage{e.ExtraKeys}
		}
		return s, nil
	case Removed:
		return &blockRemoved{Type: "BlockRemoved", BlockHashes: [][]byte{e.Block}, Medium: MediumStorage,
			Ownership: ownership(e.Tier)}, nil
	case Cleared:
		return &allBlocksCleared{Type: "AllBlocksCleared"}, nil
	}
	return nil, fmt.Errorf("event kind %d", e.Kind)
}

func ownership(tier string) string {
	if tier == "" {
		return ""
	}
	return "strata/" + tier
}

// checkValue reports whether b is exactly one msgpack value, so that an
// engine's extra keys cannot break the batch they are embedded in.
func checkValue(b []byte) error {
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Skip(); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes past the first msgpack value", r.Len())
	}
	return nil
}

// encodeBatch encodes events as one KVEventBatch at time ts; events that
// do not encode (bad extra keys) are left out and counted in bad.
func encodeBatch(ts time.Time, events []Event) (payload []byte, bad int, err error) {
	b := batch{TS: float64(ts.UnixNano()) / 1e9, Events: make([]any, 0, len(events))}
	for i := range events {
		w, err := events[i].wire()
		if err != nil {
			bad++
			continue
		}
		b.Events = append(b.Events, w)
	}
	payload, err = msgpack.Marshal(&b)
	return payload, bad, err
}

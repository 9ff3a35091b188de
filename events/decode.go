package events

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Batch is a decoded KVEventBatch.
type Batch struct {
	TS     float64
	Events []Decoded
}

// Decoded is one event of a decoded batch, whichever publisher sent it.
type Decoded struct {
	Kind   Kind
	Hashes [][]byte // block hashes (an integer hash as its 8 big-endian bytes)
	Parent []byte
	Tokens []int64
	// BlockSize, Medium, LoraName and Ownership as sent; zero when absent.
	BlockSize int64
	Medium    string
	LoraName  string
	Ownership string
}

// DecodeBatch decodes a KVEventBatch payload. It accepts each event in
// map form, tagged by "type" (the vLLM wheel's own, and strata's), and in
// array form, the tag first (older vLLM and SGLang).
func DecodeBatch(payload []byte) (Batch, error) {
	var raw []msgpack.RawMessage
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return Batch{}, fmt.Errorf("batch: %w", err)
	}
	if len(raw) < 2 {
		return Batch{}, fmt.Errorf("batch of %d fields, want ts and events", len(raw))
	}
	var b Batch
	if err := msgpack.Unmarshal(raw[0], &b.TS); err != nil {
		return Batch{}, fmt.Errorf("batch ts: %w", err)
	}
	var evs []any
	if err := msgpack.Unmarshal(raw[1], &evs); err != nil {
		return Batch{}, fmt.Errorf("batch events: %w", err)
	}
	for i, e := range evs {
		d, err := decodeEvent(e)
		if err != nil {
			return Batch{}, fmt.Errorf("event %d: %w", i, err)
		}
		b.Events = append(b.Events, d)
	}
	return b, nil
}

// The fields of each event's array form, after the tag, in order.
var arrayFields = map[string][]string{
	"BlockStored":      {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"},
	"BlockRemoved":     {"block_hashes", "medium"},
	"AllBlocksCleared": {},
}

var kinds = map[string]Kind{"BlockStored": Stored, "BlockRemoved": Removed, "AllBlocksCleared": Cleared}

func decodeEvent(v any) (Decoded, error) {
	var fields map[string]any
	switch e := v.(type) {
	case map[string]any:
		fields = e
	case []any:
		if len(e) == 0 {
			return Decoded{}, errors.New("empty event")
		}
		tag, _ := e[0].(string)
		names, ok := arrayFields[tag]
		if !ok {
			return Decoded{}, fmt.Errorf("event type %q", tag)
		}
		fields = map[string]any{"type": tag}
		for i, name := range names {
			if i+1 < len(e) {
				fields[name] = e[i+1]
			}
		}
	default:
		return Decoded{}, fmt.Errorf("event of type %T", v)
	}
	tag, _ := fields["type"].(string)
	kind, ok := kinds[tag]
	if !ok {
		return Decoded{}, fmt.Errorf("event type %q", tag)
	}
	d := Decoded{Kind: kind}
	var err error
	if hs, ok := fields["block_hashes"].([]any); ok {
		for _, h := range hs {
			b, herr := hashBytes(h)
			err = errors.Join(err, herr)
			d.Hashes = append(d.Hashes, b)
		}
	}
	if p := fields["parent_block_hash"]; p != nil {
		var perr error
		d.Parent, perr = hashBytes(p)
		err = errors.Join(err, perr)
	}
	if ts, ok := fields["token_ids"].([]any); ok {
		for _, t := range ts {
			n, ok := asInt(t)
			if !ok {
				err = errors.Join(err, fmt.Errorf("token id of type %T", t))
			}
			d.Tokens = append(d.Tokens, n)
		}
	}
	d.BlockSize, _ = asInt(fields["block_size"])
	d.Medium, _ = fields["medium"].(string)
	d.LoraName, _ = fields["lora_name"].(string)
	d.Ownership, _ = fields["ownership"].(string)
	return d, err
}

// hashBytes is a block hash as bytes: vLLM's ExternalBlockHash is bytes
// or an integer.
func hashBytes(v any) ([]byte, error) {
	switch h := v.(type) {
	case []byte:
		return bytes.Clone(h), nil
	case string:
		return []byte(h), nil
	}
	if n, ok := asInt(v); ok {
		b := make([]byte, 8)
		for i := range 8 {
			b[7-i] = byte(uint64(n) >> (8 * i))
		}
		return b, nil
	}
	return nil, fmt.Errorf("block hash of type %T", v)
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	}
	return 0, false
}

// countEvents is how many events a KVEventBatch payload carries: the
// length of its second field, read without decoding the events.
func countEvents(payload []byte) (int, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	if n, err := dec.DecodeArrayLen(); err != nil || n < 2 {
		return 0, fmt.Errorf("batch: %d fields, %v", n, err)
	}
	if err := dec.Skip(); err != nil { // ts
		return 0, fmt.Errorf("batch: %w", err)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("batch events: %w", err)
	}
	return n, nil
}

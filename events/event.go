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

// The wire format: vLLM's msgspec structs as the installed wheel encodes
// them (vllm/distributed/kv_events.py). KVEventBatch is array-like: [ts,
// events] (data_parallel_rank omitted, its default); each event is a map
// tagged by "type" with its class name, defaults omitted, the fields
// without a default always present (nil when None). The encoder writes
// them with msgpack's Encoder calls, field by field (the runs of fields
// every event of a kind shares encoded once, then copied), into a buffer
// it reuses: the library's reflection over structs of these fields cost the
// publisher about 4 µs an event (benchmarks/README.md, "KV events").
// Integers take their shortest form (msgspec reads any).
// encode_test.go checks the bytes against the reflection's over the same
// structs.

// batchEncoder encodes KVEventBatches; one goroutine's (the publisher's
// loop).
type batchEncoder struct {
	buf   bytes.Buffer
	enc   *msgpack.Encoder
	err   error             // the first error of the batch being encoded
	good  []bool            // by event of the batch being encoded: it encodes
	owner map[string][]byte // the ownership field by tier, encoded, cached
	// The runs of fields every event of a kind carries alike, encoded
	// once by the library (newBatchEncoder) and copied into each event:
	// a third of an event's encoding was these strings' (BenchmarkEncode).
	storedHead, removedHead []byte // "type", the class, "block_hashes", [1]
	parentKey, tokensKey    []byte // "parent_block_hash"; "token_ids"
	sizeKey                 []byte // "block_size"
	storedMid               []byte // "lora_id": None, "medium": STORAGE, "lora_name"
	extraKey                []byte // "extra_keys", [1]
	removedTail             []byte // "medium": STORAGE
	cleared                 []byte // the whole AllBlocksCleared
}

func newBatchEncoder() *batchEncoder {
	b := &batchEncoder{owner: map[string][]byte{}}
	b.enc = msgpack.NewEncoder(&b.buf)
	b.storedHead = encoded("type", "BlockStored", "block_hashes", arrayOfOne{})
	b.removedHead = encoded("type", "BlockRemoved", "block_hashes", arrayOfOne{})
	b.parentKey, b.tokensKey, b.sizeKey = encoded("parent_block_hash"), encoded("token_ids"), encoded("block_size")
	b.storedMid = encoded("lora_id", nil, "medium", MediumStorage, "lora_name")
	b.extraKey = encoded("extra_keys", arrayOfOne{})
	b.removedTail = encoded("medium", MediumStorage)
	b.cleared = encoded(mapOfOne{}, "type", "AllBlocksCleared")
	return b
}

// arrayOfOne and mapOfOne stand for the header of an array or a map of one
// element in encoded's values.
type (
	arrayOfOne struct{}
	mapOfOne   struct{}
)

// encoded is vals (strings, nil, arrayOfOne, mapOfOne) as the library
// encodes them one after the other.
func encoded(vals ...any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, v := range vals {
		var err error
		switch v := v.(type) {
		case string:
			err = enc.EncodeString(v)
		case nil:
			err = enc.EncodeNil()
		case arrayOfOne:
			err = enc.EncodeArrayLen(1)
		case mapOfOne:
			err = enc.EncodeMapLen(1)
		}
		if err != nil {
			panic(err) // into a bytes.Buffer: cannot fail
		}
	}
	return buf.Bytes()
}

// encode encodes events as one KVEventBatch at time ts, into a payload of
// its own; events that do not encode (bad extra keys) are left out and
// counted in bad.
func (b *batchEncoder) encode(ts time.Time, events []Event) (payload []byte, bad int, err error) {
	b.good = b.good[:0]
	for i := range events {
		ok := events[i].check() == nil
		b.good = append(b.good, ok)
		if !ok {
			bad++
		}
	}
	b.buf.Reset()
	b.err = nil
	b.put(b.enc.EncodeArrayLen(2))
	b.put(b.enc.EncodeFloat64(float64(ts.UnixNano()) / 1e9))
	b.put(b.enc.EncodeArrayLen(len(events) - bad))
	for i := range events {
		if b.good[i] {
			b.event(&events[i])
		}
	}
	if b.err != nil {
		return nil, bad, b.err
	}
	return bytes.Clone(b.buf.Bytes()), bad, nil
}

// put keeps the batch's first error.
func (b *batchEncoder) put(err error) {
	if b.err == nil {
		b.err = err
	}
}

// check reports whether ev encodes.
func (ev *Event) check() error {
	switch ev.Kind {
	case Stored:
		if ev.ExtraKeys != nil {
			if err := checkValue(ev.ExtraKeys); err != nil {
				return fmt.Errorf("extra keys: %w", err)
			}
		}
		return nil
	case Removed, Cleared:
		return nil
	}
	return fmt.Errorf("event kind %d", ev.Kind)
}

// event writes ev, which check accepted, as vLLM's event class: the
// runs every event of its kind shares copied, the rest encoded.
func (b *batchEncoder) event(ev *Event) {
	e := b.enc
	own, ok := b.owner[ev.Tier]
	if !ok && ev.Tier != "" {
		own = encoded("ownership", ownership(ev.Tier))
		if len(b.owner) < 64 {
			b.owner[ev.Tier] = own
		}
	}
	switch ev.Kind {
	case Stored:
		n := 8
		if ev.ExtraKeys != nil {
			n++
		}
		b.head(n, b.storedHead, ev.Block, own)
		b.buf.Write(b.parentKey)
		b.put(e.EncodeBytes(ev.Parent)) // nil: None
		b.buf.Write(b.tokensKey)
		b.put(e.EncodeArrayLen(len(ev.Tokens))) // list[int], never None
		for _, t := range ev.Tokens {
			b.put(e.EncodeUint(uint64(t)))
		}
		b.buf.Write(b.sizeKey)
		b.put(e.EncodeUint(uint64(ev.BlockSize)))
		b.buf.Write(b.storedMid)
		if ev.LoraName != "" {
			b.put(e.EncodeString(ev.LoraName))
		} else {
			b.put(e.EncodeNil())
		}
		if ev.ExtraKeys != nil {
			b.buf.Write(b.extraKey)
			b.buf.Write(ev.ExtraKeys) // one msgpack value (check)
		}
		b.buf.Write(own)
	case Removed:
		b.head(3, b.removedHead, ev.Block, own)
		b.buf.Write(b.removedTail)
		b.buf.Write(own)
	default: // Cleared
		b.buf.Write(b.cleared)
	}
}

// head starts a block's event: a map of n fields (and ownership, when
// own is not empty), its type and its block_hashes.
func (b *batchEncoder) head(n int, typeAndKey []byte, block []byte, own []byte) {
	if len(own) > 0 {
		n++
	}
	b.put(b.enc.EncodeMapLen(n))
	b.buf.Write(typeAndKey)
	b.put(b.enc.EncodeBytes(block))
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

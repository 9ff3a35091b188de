package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/minio/sha256-simd"
)

// record is one line of a Mooncake-format trace.
type record struct {
	Timestamp    int64   `json:"timestamp"`
	InputLength  int     `json:"input_length"`
	OutputLength int     `json:"output_length"`
	HashIDs      []int64 `json:"hash_ids"`
}

// request is a record with its blocks renumbered densely.
type request struct {
	tokens int     // input length
	blocks []int32 // dense block ids, in prefix order
}

// block is one distinct page of the trace. Hash ids name a prefix, so a
// block has one parent and one depth wherever it appears.
type block struct {
	key      [32]byte // placement key: SHA-256 chain over the hash-id prefix
	parent   int32    // -1 for the first page of a sequence
	depth    uint32
	tokens   int32   // tokens the block holds (the last may be partial)
	children []int32 // every block whose parent this is
	uses     []int32 // indices of the requests that contain it, ascending
}

// trace is a loaded trace.
type trace struct {
	reqs   []request
	blocks []block
	bytes  int64 // KV bytes of all distinct blocks
}

// loadTrace reads a Mooncake-format JSON-lines trace, or generates one
// when path is gen:NAME[:SEED] (workload.go). pageTokens is the block size
// the hash ids were computed with (512 in Mooncake traces); every is the
// sampling stride (1 keeps every request); limit, when > 0, keeps only the
// first limit requests replayed (after sampling).
func loadTrace(path string, pageTokens, every, limit int) (*trace, error) {
	recs, gen, err := genSource(path)
	if err != nil {
		return nil, err
	}
	if gen {
		return recordsTrace(recs, pageTokens, every, limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	return parseTrace(f, pageTokens, every, limit)
}

func parseTrace(r io.Reader, pageTokens, every, limit int) (*trace, error) {
	b := newTraceBuilder(pageTokens, every, limit)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 0; !b.full() && sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 || line%b.every != 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line+1, err)
		}
		if err := b.add(&rec, line); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	return b.done()
}

// recordsTrace is parseTrace over records already decoded.
func recordsTrace(recs []record, pageTokens, every, limit int) (*trace, error) {
	b := newTraceBuilder(pageTokens, every, limit)
	for line := 0; line < len(recs) && !b.full(); line++ {
		if line%b.every != 0 {
			continue
		}
		if err := b.add(&recs[line], line); err != nil {
			return nil, err
		}
	}
	return b.done()
}

// traceBuilder renumbers the blocks of records as they come.
type traceBuilder struct {
	t                 *trace
	ids               map[int64]int32
	pageTokens, every int
	limit             int
}

func newTraceBuilder(pageTokens, every, limit int) *traceBuilder {
	return &traceBuilder{t: &trace{}, ids: make(map[int64]int32), pageTokens: pageTokens, every: max(every, 1), limit: limit}
}

func (tb *traceBuilder) full() bool { return tb.limit > 0 && len(tb.t.reqs) >= tb.limit }

// add appends rec, line line of the trace (0-based).
func (tb *traceBuilder) add(rec *record, line int) error {
	t, pageTokens := tb.t, tb.pageTokens
	if rec.InputLength <= 0 || len(rec.HashIDs) == 0 {
		return nil
	}
	req := request{tokens: rec.InputLength, blocks: make([]int32, len(rec.HashIDs))}
	parent := int32(-1)
	for i, h := range rec.HashIDs {
		b, ok := tb.ids[h]
		if !ok {
			b = int32(len(t.blocks))
			tb.ids[h] = b
			tok := min(pageTokens, rec.InputLength-i*pageTokens)
			if tok <= 0 {
				tok = pageTokens
			}
			nb := block{parent: parent, depth: uint32(i), tokens: int32(tok), key: chainKey(t, parent, h)}
			t.blocks = append(t.blocks, nb)
			if parent >= 0 {
				t.blocks[parent].children = append(t.blocks[parent].children, b)
			}
		} else if t.blocks[b].parent != parent {
			return fmt.Errorf("trace line %d: hash id %d has two parents", line+1, h)
		}
		req.blocks[i] = b
		parent = b
		u := &t.blocks[b].uses
		if n := len(*u); n == 0 || (*u)[n-1] != int32(len(t.reqs)) {
			*u = append(*u, int32(len(t.reqs)))
		}
	}
	t.reqs = append(t.reqs, req)
	return nil
}

func (tb *traceBuilder) done() (*trace, error) {
	if len(tb.t.reqs) == 0 {
		return nil, fmt.Errorf("trace has no requests")
	}
	return tb.t, nil
}

// chainKey is SHA-256(parent key || LE-uint64 hash id), with 32 zero bytes
// before the first page: deterministic, and uniform for placement.
func chainKey(t *trace, parent int32, id int64) [32]byte {
	var buf [40]byte
	if parent >= 0 {
		copy(buf[:32], t.blocks[parent].key[:])
	}
	binary.LittleEndian.PutUint64(buf[32:], uint64(id))
	return sha256.Sum256(buf[:])
}

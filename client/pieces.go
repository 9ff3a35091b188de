package client

import (
	"context"
	"sync"
)

// Pieces names pages whose bytes are in several pieces (an engine's page
// in K and V halves, a vLLM block's per-layer runs), for a Get or a Put
// it is passed to (WithPieces). The caller passes a buffer per page as
// usual, of the page's size (a staging buffer), and registers the page's
// pieces under it:
//   - a Get: a plane that can write a page straight into its pieces
//     (shared memory: a copy out of the arena either way) does so and
//     records it. The caller then copies from the buffer only the pages
//     Written says were not (they came on another plane).
//   - a Put: the buffer need not hold the page yet. The shared-memory
//     plane copies a page straight from its pieces into the arena, and the
//     raw tcp plane writes them to its socket, checksumming them on the
//     way; before any other plane reads a page, its pieces are gathered
//     into its buffer once (gather). Pieces must add up to the page's
//     size.
//
// The Python client's native plane (cmd/libstrata) uses it to spare a
// copy of every page of an engine's batch.
type Pieces struct {
	mu       sync.Mutex
	pieces   map[*byte][][]byte
	written  map[*byte]bool
	gathered map[*byte]*sync.Once
}

// NewPieces is an empty registry.
func NewPieces() *Pieces {
	return &Pieces{pieces: map[*byte][][]byte{}, written: map[*byte]bool{}, gathered: map[*byte]*sync.Once{}}
}

// Add registers pieces as the destination (a Get) or the source (a Put)
// of the page whose buffer is buf (not empty). Register before the call.
func (p *Pieces) Add(buf []byte, pieces [][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pieces[&buf[0]] = pieces
}

// Written reports whether the page of buf went straight into its pieces.
func (p *Pieces) Written(buf []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.written[&buf[0]]
}

// of returns the pieces registered for buf, nil for none (or no registry).
func (p *Pieces) of(buf []byte) [][]byte {
	if p == nil || len(buf) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pieces[&buf[0]]
}

// gather copies into the Data of each page of pages at the indexes at (nil:
// every page) that has pieces registered the pieces, in order: the bytes
// every plane but shared memory sends. A page is gathered once, whichever
// plane or node asks first; a caller that finds it under way waits for it.
func (p *Pieces) gather(pages []Page, at []int) {
	if p == nil {
		return
	}
	one := func(i int) {
		buf := pages[i].Data
		pieces := p.of(buf)
		if pieces == nil {
			return
		}
		p.mu.Lock()
		once := p.gathered[&buf[0]]
		if once == nil {
			once = new(sync.Once)
			p.gathered[&buf[0]] = once
		}
		p.mu.Unlock()
		once.Do(func() {
			off := 0
			for _, pc := range pieces {
				off += copy(buf[off:], pc)
			}
		})
	}
	if at == nil {
		for i := range pages {
			one(i)
		}
		return
	}
	for _, i := range at {
		one(i)
	}
}

// piecesLen is how many bytes pieces hold together.
func piecesLen(pieces [][]byte) int {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	return n
}

// cutPieces is the bytes [off, end) of the page pieces make, as pieces of
// their own (nil for nil pieces).
func cutPieces(pieces [][]byte, off, end int) [][]byte {
	if pieces == nil {
		return nil
	}
	var out [][]byte
	at := 0
	for _, p := range pieces {
		lo, hi := max(off, at), min(end, at+len(p))
		if lo < hi {
			out = append(out, p[lo-at:hi-at])
		}
		at += len(p)
	}
	return out
}

// wrote records that buf's page is in its pieces.
func (p *Pieces) wrote(buf []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written[&buf[0]] = true
}

type piecesKey struct{}

// WithPieces returns ctx carrying p to the Get it is passed to.
func WithPieces(ctx context.Context, p *Pieces) context.Context {
	return context.WithValue(ctx, piecesKey{}, p)
}

func piecesOf(ctx context.Context) *Pieces {
	p, _ := ctx.Value(piecesKey{}).(*Pieces)
	return p
}

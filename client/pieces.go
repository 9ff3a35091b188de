package client

import (
	"context"
	"sync"
)

// Pieces names, for a Get, pages whose destination is in several pieces
// (an engine's page in K and V halves, a vLLM block's per-layer runs): the
// caller passes Get a buffer per page as usual (a staging buffer) and
// registers its pieces here; a plane that can write a page straight into
// its pieces (shared memory: a copy out of the arena either way) does so
// and records it. The caller then copies from the buffer only the pages
// Written says were not (they came on another plane). The Python
// client's native plane (cmd/libstrata) uses it to spare a copy per page.
type Pieces struct {
	mu      sync.Mutex
	pieces  map[*byte][][]byte
	written map[*byte]bool
}

// NewPieces is an empty registry.
func NewPieces() *Pieces {
	return &Pieces{pieces: map[*byte][][]byte{}, written: map[*byte]bool{}}
}

// Add registers pieces as the destination of the page whose buffer is
// buf (not empty). Register before the Get.
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

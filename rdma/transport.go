package rdma

import (
	"context"

	"github.com/stratakv/strata/namespace"
)

// Extent is where a page lies in a node's host arena, as the node reports
// it under a lease or reservation.
type Extent struct {
	Off int64  // byte offset in the arena
	Len int64  // page length
	Gen uint64 // the extent's generation while live
	// GenIndex is the index of the extent's generation word in the
	// generations mapping.
	GenIndex int64
}

// Op is one copy of a transfer: between a page (named by Key for the tcp
// backend, by Ext for shm and verbs) and Buf.
type Op struct {
	Key namespace.Key
	Ext Extent
	// Buf is the caller's buffer: the destination of a Read (at least
	// Ext.Len bytes), the source of a Write (exactly the page).
	Buf []byte
	// OK is set by Read when Buf holds the page exactly, and by Write when
	// the bytes were placed. A Read that raced a reclaim leaves it false.
	OK bool
}

// Transport moves batches of pages. Read fills each op's Buf and sets OK
// for the pages that arrived intact; a page that did not is a miss, not an
// error. Write places each op's Buf. Errors are for the batch as a whole
// (the transport failed); Close releases the transport.
type Transport interface {
	Read(ctx context.Context, ops []Op) error
	Write(ctx context.Context, ops []Op) error
	Close() error
}

package transport

import "github.com/stratakv/strata/proto/frame"

// Op is one copy between a page extent on a node (Ext) and a caller's
// buffer (Buf), for the shm backend's Read and Write. Read fills
// each op's Buf and sets OK for the pages that arrived intact; a page that
// did not is a miss, not an error. Errors are for the batch as a whole.
type Op struct {
	Ext frame.Extent
	// Buf is the caller's buffer: the destination of a Read (at least
	// Ext.Len bytes), the source of a Write (exactly the page).
	Buf []byte
	// Pieces, when not nil, stands for Buf: a Read's destination, the
	// page written into them in order (an engine's page in several pieces,
	// e.g. its K and V halves), which together hold at least Ext.Len
	// bytes; or a Write's source, the page read from them in order, which
	// together hold exactly Ext.Len bytes.
	Pieces [][]byte
	// OK is set by Read when Buf holds the page exactly, and by Write when
	// the bytes were placed. A Read that raced a reclaim leaves it false.
	OK bool
}

// dstLen is how many bytes a Read's destination or a Write's source
// holds.
func (op *Op) dstLen() int {
	if op.Pieces == nil {
		return len(op.Buf)
	}
	return piecesLen(op.Pieces)
}

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
	// OK is set by Read when Buf holds the page exactly, and by Write when
	// the bytes were placed. A Read that raced a reclaim leaves it false.
	OK bool
}

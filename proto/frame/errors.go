package frame

import "errors"

var (
	// ErrMalformed is returned by the decoders for a frame that is
	// truncated, has trailing bytes, an unknown op, or counts that do not
	// fit its length.
	ErrMalformed = errors.New("malformed frame")
	// ErrTooLarge is returned for a frame longer than a connection's limit
	// (the connection cannot continue), and by AppendHead for one whose
	// length does not fit its header.
	ErrTooLarge = errors.New("frame too large")
)

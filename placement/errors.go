package placement

import "errors"

var (
	// ErrBadID is returned by NewView for a node whose ID is empty or is not
	// valid UTF-8 (other languages must hash the same bytes).
	ErrBadID = errors.New("node ID is empty or not valid UTF-8")
	// ErrDuplicateID is returned by NewView when two nodes share an ID.
	ErrDuplicateID = errors.New("duplicate node ID")
	// ErrBadWeight is returned by NewView for a node whose weight is not a
	// finite number greater than zero.
	ErrBadWeight = errors.New("node weight must be finite and > 0")
)

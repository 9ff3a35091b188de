package namespace

import "errors"

var (
	// ErrBadID is returned when bytes or text are not a 32-byte namespace ID.
	ErrBadID = errors.New("malformed namespace id")
	// ErrBadKey is returned when bytes or text are not a 32-byte page key.
	ErrBadKey = errors.New("malformed page key")
	// ErrInvalid is returned by Validate and Decode for descriptors that
	// break a rule; the wrapping message names the field.
	ErrInvalid = errors.New("invalid namespace descriptor")
)

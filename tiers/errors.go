package tiers

import "errors"

var (
	// ErrFull is returned by Alloc when the tier has no room for the extent
	// right now; freeing extents may make room.
	ErrFull = errors.New("tier full")
	// ErrTooLarge is returned by Alloc when the size exceeds what the tier
	// could ever hold in one extent.
	ErrTooLarge = errors.New("extent larger than the tier allows")
	// ErrOutOfRange is returned by WriteAt and ReadAt for ranges outside the
	// extent.
	ErrOutOfRange = errors.New("range outside the extent")
	// ErrClosed is returned by operations on a closed tier.
	ErrClosed = errors.New("tier closed")
	// ErrInvalidConfig is returned by a tier's constructor when its
	// configuration is rejected; the wrapping error names the field.
	ErrInvalidConfig = errors.New("invalid tier configuration")
)

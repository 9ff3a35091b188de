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
	// ErrUnavailable is returned by a tier's constructor when the memory it
	// manages is absent on this machine (no CUDA driver, no device, a driver
	// too old); the wrapping error says why. The node runs without the tier.
	ErrUnavailable = errors.New("tier unavailable")
	// ErrNotRecovered is returned by a durable tier's Alloc before Recover
	// has run: recovery decides which slots are free.
	ErrNotRecovered = errors.New("durable tier not recovered yet")
	// ErrRecovered is returned by a second call of a durable tier's Recover.
	ErrRecovered = errors.New("durable tier already recovered")
	// ErrSealed is returned by WriteAt and Seal on an extent already sealed:
	// a sealed page is immutable.
	ErrSealed = errors.New("extent already sealed")
	// ErrStale is returned by WriteAt, ReadAt and Seal on an extent that is
	// no longer live (freed, or freed and reallocated while a read ran).
	ErrStale = errors.New("extent no longer live")
	// ErrPending is returned by TryAlloc when the tier is making room in
	// the background (a slot file being created, freed slots being synced):
	// wait (WaitRoom) outside the caller's locks and try again.
	ErrPending = errors.New("tier making room")
	// ErrFailing is returned by Alloc while the tier cannot write at all
	// (a read-only file system); the pages it holds stay readable.
	ErrFailing = errors.New("tier failing writes")
	// ErrInvalidMeta is returned by Seal when the page metadata does not
	// fit the extent (length) or itself (checksum algorithm and length).
	ErrInvalidMeta = errors.New("invalid page metadata")
)

package transfer

import "errors"

var (
	// ErrRoomBusy is returned by Open for a room whose current attempt is
	// not terminal (open, published, being loaded, or aborted and still
	// draining).
	ErrRoomBusy = errors.New("room has a live attempt")
	// ErrStaleAttempt is returned by a call naming an attempt that is not
	// its room's current one: a late or duplicate call from an attempt
	// that has a successor, or one whose record was forgotten. It changes
	// nothing.
	ErrStaleAttempt = errors.New("attempt is not the room's current one")
	// ErrNoRoom is returned for a room this node holds no record of.
	ErrNoRoom = errors.New("no such room")
	// ErrAborted is returned by Publish for an attempt aborted before it
	// published (nothing is pinned), and by Await for an attempt aborted
	// before the consumer took it.
	ErrAborted = errors.New("attempt aborted")
	// ErrExpired is returned for an attempt whose producer never published
	// in time, or whose pin's TTL passed before the consumer acknowledged.
	ErrExpired = errors.New("attempt expired")
	// ErrWrongState is returned by a call the attempt's state does not
	// allow: Publish twice, Ack before the consumer took the pages.
	ErrWrongState = errors.New("call not allowed in the attempt's state")
	// ErrMismatch is returned by Await when the consumer's namespace is
	// not the producer's; the error names the differing descriptor fields.
	ErrMismatch = errors.New("consumer namespace differs from the producer's")
	// ErrPinQuota is returned by Publish when pinning the pages would take
	// the tenant over its quota of pinned bytes, or the node over its cap.
	ErrPinQuota = errors.New("pinned bytes over quota")
	// ErrTooManyRooms is returned by Open when the node holds its cap of
	// live rooms.
	ErrTooManyRooms = errors.New("too many live rooms")
	// ErrBadRequest is returned for malformed calls: an empty room name, a
	// publish with no pages or keys and sizes that disagree, an unknown
	// abort reason.
	ErrBadRequest = errors.New("malformed transfer request")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("transfer rooms closed")
)

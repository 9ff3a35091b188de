package rdma

import "errors"

var (
	// ErrNoVerbs is returned by OpenVerbs in builds without the rdma tag
	// (or without cgo, or off Linux), and by the verbs backend when no RDMA
	// device is present.
	ErrNoVerbs = errors.New("rdma verbs not available")
	// ErrFrame is returned by the frame decoders for a frame that is
	// truncated, has trailing bytes, an unknown op, or counts that do not
	// fit its length.
	ErrFrame = errors.New("malformed frame")
	// ErrFrameTooLarge is returned by Conn.Read for a frame longer than the
	// connection's limit; the connection cannot continue.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrOutOfRange is returned by the shm backend for an op whose extent
	// leaves the mapping or whose buffer is shorter than the extent.
	ErrOutOfRange = errors.New("extent outside the mapping or buffer too small")
	// ErrStale is returned by the shm backend's Write for an extent that is
	// no longer live (its reservation expired): nothing was written.
	ErrStale = errors.New("extent no longer live")
	// ErrClosed is returned by a closed transport.
	ErrClosed = errors.New("transport closed")
)

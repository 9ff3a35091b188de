package transport

import "errors"

var (
	// ErrNoVerbs is returned by OpenVerbs in builds without the rdma tag
	// (or without cgo, or off Linux), and by the verbs backend when no RDMA
	// device is present.
	ErrNoVerbs = errors.New("rdma verbs not available")
	// ErrOutOfRange is returned by the shm and verbs backends for an op
	// whose extent leaves the mapping or whose buffer is shorter than the
	// extent, and by Conn.RecvPage for a page longer than its buffer.
	ErrOutOfRange = errors.New("extent outside the mapping or buffer too small")
	// ErrStale is returned by the shm backend's Write for an extent that is
	// no longer live (its reservation expired): nothing was written.
	ErrStale = errors.New("extent no longer live")
	// ErrClosed is returned by a closed Shm or an unconnected Verbs.
	ErrClosed = errors.New("transport closed")
)

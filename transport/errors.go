package transport

import "errors"

var (
	// ErrOutOfRange is returned by the shm backend for an op
	// whose extent leaves the mapping or whose buffer is shorter than the
	// extent, and by Conn.RecvPage for a page longer than its buffer.
	ErrOutOfRange = errors.New("extent outside the mapping or buffer too small")
	// ErrStale is returned by the shm backend's Write for an extent that is
	// no longer live (its reservation expired): nothing was written.
	ErrStale = errors.New("extent no longer live")
	// ErrClosed is returned by a closed Shm.
	ErrClosed = errors.New("transport closed")
)

package rdma

import "errors"

var (
	// ErrUnavailable is returned by Open in builds without the rdma tag
	// (or without cgo, or off Linux), when the machine has no RDMA device,
	// or none of the configured name; the message says which.
	ErrUnavailable = errors.New("rdma not available")
	// ErrOutOfRange is returned by Register for no memory, and by Read and
	// Write for an op whose buffer leaves the local region or whose extent
	// leaves the peer's registered memory: nothing of the batch was posted.
	ErrOutOfRange = errors.New("outside the registered memory")
	// ErrDeregistered is returned by Region.Deregister for a region already
	// deregistered, and by Read and Write given one.
	ErrDeregistered = errors.New("memory region already deregistered")
	// ErrClosed is returned by Register on a closed Device, and by Read and
	// Write on a Pair not connected or closed.
	ErrClosed = errors.New("rdma closed")
	// ErrLeaked is returned by Device.Close when regions were still
	// registered (Close deregistered them) or queue pairs still open (Close
	// left the device open).
	ErrLeaked = errors.New("rdma resources left open")
)

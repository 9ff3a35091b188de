package rdma

import "fmt"

// Config configures a Device and the Pairs made on it. Zero fields take
// their defaults.
type Config struct {
	// Device names the RDMA device, as ibv_devices lists it. Default: the
	// first device.
	Device string
	// Port is the device port. Default 1.
	Port int
	// GIDIndex selects the GID used to address the peer (RoCE, soft-RoCE
	// included, needs one). Default 0.
	GIDIndex int
	// Depth is the most operations a Pair has in flight. Default 64.
	Depth int
}

func (c *Config) setDefaults() {
	if c.Port <= 0 {
		c.Port = 1
	}
	if c.Depth <= 0 {
		c.Depth = 64
	}
}

// Endpoint is what a peer needs to connect to a Pair and reach the memory
// it exposes: the queue pair's address, and the registered region's start,
// key and size (all zero when it exposes none).
type Endpoint struct {
	LID  uint16
	GID  [16]byte // zero: address the peer by LID (InfiniBand)
	QPN  uint32
	PSN  uint32
	Addr uint64
	RKey uint32
	Size uint64
}

// Op is one RDMA READ or WRITE between Buf, which lies in a local Region,
// and len(Buf) bytes at Off in the peer's registered memory. Read and
// Write set OK once the op completed.
type Op struct {
	Off int64
	Buf []byte
	OK  bool
}

// checkOps refuses a batch with an op whose buffer leaves local or whose
// extent leaves the peer's memory (remote), before anything is posted.
func checkOps(local *Region, remote Endpoint, ops []Op) error {
	for i, op := range ops {
		n := int64(len(op.Buf))
		switch {
		case n == 0:
			return fmt.Errorf("op %d moves no bytes: %w", i, ErrOutOfRange)
		case !local.contains(op.Buf):
			return fmt.Errorf("op %d: buffer of %d bytes outside the local region: %w", i, n, ErrOutOfRange)
		case op.Off < 0 || uint64(op.Off) > remote.Size || uint64(n) > remote.Size-uint64(op.Off):
			return fmt.Errorf("op %d: %d bytes at %d outside the peer's %d: %w", i, n, op.Off, remote.Size, ErrOutOfRange)
		}
	}
	return nil
}

package transport

// The verbs backend's configuration and endpoints, in every build (the
// backend itself is verbs.go with the rdma tag, verbs_stub.go without).

// VerbsConfig configures a verbs endpoint. Zero fields take their defaults.
type VerbsConfig struct {
	// Device names the RDMA device (as in ibv_devices). Default: the first.
	Device string
	// Port is the device port. Default 1.
	Port int
	// GIDIndex selects the GID used to address the peer (RoCE needs one).
	// Default 0.
	GIDIndex int
	// Depth is the most operations in flight. Default 64.
	Depth int
}

// Endpoint is what a peer needs to reach this side's registered memory.
type Endpoint struct {
	LID  uint16
	GID  [16]byte
	QPN  uint32
	PSN  uint32
	Addr uint64 // start of the registered memory
	RKey uint32
	Size uint64
}

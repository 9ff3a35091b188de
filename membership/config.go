package membership

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"
)

// Config configures Start. Zero fields take the defaults stated beside them,
// which are Profile's. The default profile's timing suits a LAN or loopback:
// with it a crashed member is declared Dead by its peers within about
// 1.5–3.5 s in a cluster of under ten members (see the package comment for
// the arithmetic).
type Config struct {
	// NodeID names this member; it is required and must be unique in the
	// cluster (it is memberlist's node name). A member that restarts with
	// the same NodeID takes its old place.
	NodeID string
	// BindAddr is the IP gossip listens on, UDP and TCP. Default
	// "127.0.0.1".
	BindAddr string
	// BindPort is the gossip port, UDP and TCP. Default 0: the kernel picks
	// a free port, which GossipAddress reports.
	BindPort int
	// AdvertiseAddr is the IP other members reach this one on. Default
	// BindAddr; required when BindAddr is a wildcard (0.0.0.0, ::).
	AdvertiseAddr string
	// Seeds are gossip endpoints (host:port) of members to join at Start.
	// Default none: start alone, as the first member. This member's own
	// address is skipped, so every member may share one list.
	Seeds []string
	// AllowAlone lets Start succeed alone when Seeds is not empty but no
	// seed answered within JoinTimeout; the member keeps retrying the
	// seeds in the background. Default false: Start fails with ErrNoSeed.
	AllowAlone bool
	// JoinTimeout bounds Start's attempts to join Seeds when Start's
	// context has no earlier deadline. Default 10 s.
	JoinTimeout time.Duration
	// Meta returns this member's current metadata. It is called when
	// gossip asks for it (at Start, UpdateMeta and Leave), possibly from
	// memberlist's goroutines, so it must be fast and safe for concurrent
	// use. Default: no metadata beyond the NodeID.
	Meta func() Meta
	// Report returns this member's report: opaque bytes, at most
	// MaxReportSize, that a member asking for them (Collect) gets by a
	// direct packet, not by gossip (report.go). It is called on each ask,
	// from memberlist's packet goroutine, so it must be fast and safe for
	// concurrent use. Default: none (asks are answered with no report).
	Report func() []byte

	// Profile names the set of defaults the gossip fields below take when
	// zero: ProfileLocal (default), ProfileLAN or ProfileWAN (profiles.go
	// lists their values and the cluster sizes each suits).
	Profile Profile
	// ProbeInterval is the time between failure-detection probes of one
	// random peer. Default 500 ms (ProfileLocal's, as every default below
	// that profiles.go sets; the others are there).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for a direct ack before asking
	// other members to probe indirectly; at most ProbeInterval. Default
	// 250 ms (the profile's), or half of a ProbeInterval set apart from the
	// profile's if that is less.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspect member has to refute before
	// it is declared Dead: SuspicionMult × max(1, log10(n)) ×
	// ProbeInterval. Default 4 (2 s with the default ProbeInterval).
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds how much longer than the above the
	// suspicion may last when no other member confirms it (a member cut
	// off from everyone). Default 3.
	SuspicionMaxTimeoutMult int
	// GossipInterval is the time between gossip rounds that spread
	// membership and metadata changes. Default 100 ms.
	GossipInterval time.Duration
	// PushPullInterval is the time between full state exchanges with a
	// random peer. Default 10 s.
	PushPullInterval time.Duration
	// ReconnectInterval is the time between attempts to reach one member
	// that is Dead (not Left), or the seeds when no peer is alive; this is
	// what merges the two sides of a healed partition. Default 1 s.
	ReconnectInterval time.Duration
	// DeadRetention is how long Members keeps reporting a Dead or Left
	// member (and reconnection keeps trying a Dead one). Default 10 min.
	DeadRetention time.Duration
	// TCPTimeout bounds one stream exchange (a join's or a push-pull's
	// state, a TCP probe). Default 1 s.
	TCPTimeout time.Duration
	// GossipNodes is how many random members each gossip round sends to.
	// Default 3.
	GossipNodes int
	// RetransmitMult scales how many times each member passes a change on:
	// RetransmitMult × ceil(log10(n+1)). Default 2.
	RetransmitMult int
	// IndirectChecks is how many members are asked to probe a member that
	// did not answer a direct probe. Default 1.
	IndirectChecks int
	// MetaRate is about the metadata broadcasts per second a cluster of
	// many more than 32 members keeps to by UpdateMetaPaced: each member
	// broadcasts at most every (n−32)/MetaRate seconds, n the members it
	// knows (at a thousand members and the default, every 484 s; at a
	// hundred, 34 s; up to 32, every time). Default 2.
	MetaRate float64
	// JoinFanout is how many seeds a join exchanges state with: Start and
	// Join try the seeds in a random order, this many at a time, and stop
	// once one round reaches any (each exchange carries the whole
	// membership, so joining every seed of a thousand would move the
	// cluster's state a thousand times). Default 3.
	JoinFanout int
	// Compression says whether this member compresses its gossip packets
	// and state exchanges: CompressionOn or CompressionOff. Default the
	// profile's (profiles.go).
	Compression Compression

	// TimeScale multiplies every interval and timeout above, set or
	// defaulted (JoinTimeout, DeadRetention and the leave's bounds too),
	// and divides MetaRate: the protocol runs k times slower in wall time,
	// with the same counts and ratios. A seam for running many members in
	// one process on few cores (strata-cluster-sim --dilate), where each
	// member gets 1/k of the CPU it would need at real speed: times it
	// measures are divided by k, rates multiplied. Default 1.
	TimeScale float64

	// Keys are the gossip encryption keys (AES-GCM; 16, 24 or 32 bytes
	// each): the first encrypts what this member sends, every one is tried
	// on what it receives, and a message none of them opens is dropped, so
	// a member without a key of the cluster's is not heard. Rotate with
	// SetKeys: add the new key everywhere, make it first everywhere, then
	// remove the old one. Default none: gossip in clear.
	Keys [][]byte

	// Network, if not nil, is the in-process network gossip goes over
	// instead of UDP and TCP sockets: BindAddr, BindPort and AdvertiseAddr
	// are then ignored, and the member takes a fresh address of the
	// network's. A seam for running many members in one process (the
	// cluster simulator). Default nil: sockets.
	Network *Network
	// Partition, if not nil, drops this member's gossip to and from the
	// peers it blocks: a seam for fault injection. Default nil.
	Partition *Partition
	// Logger receives memberlist's log lines and this package's. Default:
	// discard.
	Logger *slog.Logger
}

// scaled is d times cfg.TimeScale.
func (cfg Config) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * cfg.TimeScale)
}

// withDefaults returns cfg with zero fields defaulted and its times
// scaled by TimeScale, or an error wrapping ErrInvalidConfig.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.NodeID == "" {
		return cfg, fmt.Errorf("NodeID is required: %w", ErrInvalidConfig)
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1"
	}
	if net.ParseIP(cfg.BindAddr) == nil {
		return cfg, fmt.Errorf("BindAddr %q is not an IP: %w", cfg.BindAddr, ErrInvalidConfig)
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 {
		return cfg, fmt.Errorf("BindPort %d out of range: %w", cfg.BindPort, ErrInvalidConfig)
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = cfg.BindAddr
	}
	if ip := net.ParseIP(cfg.AdvertiseAddr); ip == nil || ip.IsUnspecified() {
		return cfg, fmt.Errorf("AdvertiseAddr %q must be a specific IP: %w", cfg.AdvertiseAddr, ErrInvalidConfig)
	}
	for _, s := range cfg.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return cfg, fmt.Errorf("seed %q: %v: %w", s, err, ErrInvalidConfig)
		}
	}
	for i, k := range cfg.Keys {
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return cfg, fmt.Errorf("gossip key %d is %d bytes, not 16, 24 or 32: %w", i, l, ErrInvalidConfig)
		}
	}
	if cfg.Meta == nil {
		cfg.Meta = func() Meta { return Meta{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, ok := defaultsOf(cfg.Profile)
	if !ok {
		return cfg, fmt.Errorf("profile %q: not %s, %s nor %s: %w", cfg.Profile, ProfileLocal, ProfileLAN, ProfileWAN, ErrInvalidConfig)
	}
	if cfg.Profile == "" {
		cfg.Profile = ProfileLocal
	}
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"JoinTimeout", &cfg.JoinTimeout, 10 * time.Second},
		{"ProbeInterval", &cfg.ProbeInterval, p.ProbeInterval},
		{"GossipInterval", &cfg.GossipInterval, p.GossipInterval},
		{"PushPullInterval", &cfg.PushPullInterval, p.PushPullInterval},
		{"ReconnectInterval", &cfg.ReconnectInterval, time.Second},
		{"DeadRetention", &cfg.DeadRetention, 10 * time.Minute},
		{"TCPTimeout", &cfg.TCPTimeout, p.TCPTimeout},
	}
	for _, f := range durations {
		if *f.d < 0 {
			return cfg, fmt.Errorf("%s %v is negative: %w", f.name, *f.d, ErrInvalidConfig)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if cfg.ProbeTimeout < 0 {
		return cfg, fmt.Errorf("ProbeTimeout %v is negative: %w", cfg.ProbeTimeout, ErrInvalidConfig)
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = p.ProbeTimeout
		if cfg.ProbeInterval != p.ProbeInterval {
			cfg.ProbeTimeout = min(p.ProbeTimeout, cfg.ProbeInterval/2)
		}
	}
	if cfg.ProbeTimeout > cfg.ProbeInterval {
		return cfg, fmt.Errorf("ProbeTimeout %v exceeds ProbeInterval %v: %w", cfg.ProbeTimeout, cfg.ProbeInterval, ErrInvalidConfig)
	}
	if cfg.MetaRate < 0 || math.IsNaN(cfg.MetaRate) || math.IsInf(cfg.MetaRate, 0) {
		return cfg, fmt.Errorf("MetaRate %v: want a positive rate: %w", cfg.MetaRate, ErrInvalidConfig)
	}
	if cfg.MetaRate == 0 {
		cfg.MetaRate = 2
	}
	if cfg.TimeScale < 0 || math.IsNaN(cfg.TimeScale) || math.IsInf(cfg.TimeScale, 0) {
		return cfg, fmt.Errorf("TimeScale %v: want a positive factor: %w", cfg.TimeScale, ErrInvalidConfig)
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	for _, f := range durations {
		*f.d = cfg.scaled(*f.d)
	}
	cfg.ProbeTimeout = cfg.scaled(cfg.ProbeTimeout)
	cfg.MetaRate /= cfg.TimeScale
	counts := []struct {
		name string
		n    *int
		def  int
	}{
		{"SuspicionMult", &cfg.SuspicionMult, p.SuspicionMult},
		{"SuspicionMaxTimeoutMult", &cfg.SuspicionMaxTimeoutMult, p.SuspicionMaxTimeoutMult},
		{"GossipNodes", &cfg.GossipNodes, p.GossipNodes},
		{"RetransmitMult", &cfg.RetransmitMult, p.RetransmitMult},
		{"IndirectChecks", &cfg.IndirectChecks, p.IndirectChecks},
		{"JoinFanout", &cfg.JoinFanout, 3},
	}
	for _, f := range counts {
		if *f.n < 0 {
			return cfg, fmt.Errorf("%s %d is negative: %w", f.name, *f.n, ErrInvalidConfig)
		}
		if *f.n == 0 {
			*f.n = f.def
		}
	}
	switch cfg.Compression {
	case "":
		cfg.Compression = p.Compression
	case CompressionOn, CompressionOff:
	default:
		return cfg, fmt.Errorf("Compression %q: not %s nor %s: %w", cfg.Compression, CompressionOn, CompressionOff, ErrInvalidConfig)
	}
	return cfg, nil
}

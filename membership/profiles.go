package membership

import "time"

// Profile names a set of gossip defaults (Config.Profile): how often
// members probe and gossip, how long a suspect has to refute, how long a
// stream may take. Each is memberlist's profile of the same name as
// strata tunes it; strata-cluster-sim measured them at 10 to 1,000
// members (docs/design.md §6.7).
type Profile string

const (
	// ProfileLocal (the default) suits clusters of up to about fifty
	// members on one LAN or loopback: a crash is seen Dead by 99% of ten
	// members in about 3 s and of a hundred in about 5 s, at a few KB/s of
	// gossip per member; its 1 s stream timeout cannot carry the state of
	// several hundred members under load, and its suspicion timeout lets
	// a busy member of hundreds be declared dead by mistake.
	ProfileLocal Profile = "local"
	// ProfileLAN suits clusters of fifty members and more in one
	// datacenter (strata-cluster-sim converged 1,000 with it from a cold
	// start in 51 s, a crash seen by 99% in 5.6 s and at most 21 KB/s of
	// gossip a member, docs/design.md §6.7): a slower gossip round
	// (200 ms, three members), two indirect probes, suspicions of
	// 3 × log10(n) probe intervals, full state exchanged every 30 s
	// (memberlist stretches it with n: 180 s at a thousand members) and
	// 10 s to exchange it, and no compression: at 100 members LZW saved
	// 14% of the bytes (3,265 against 3,784 B/s a member) for about three
	// times the gossip's CPU, and a cold start of a thousand members is
	// bound by that CPU (each member takes in some 12,000 alive copies).
	ProfileLAN Profile = "lan"
	// ProfileWAN suits members across sites, with round trips of tens to
	// hundreds of milliseconds: memberlist's WAN timing (probes every 5 s
	// given 3 s to answer, suspicions of 6 × log10(n) probe intervals,
	// gossip to four members every 500 ms, state every 60 s over up to
	// 30 s). Failure detection takes tens of seconds.
	ProfileWAN Profile = "wan"
)

// Compression says whether a member compresses what it gossips
// (Config.Compression). Either way it reads compressed and plain
// messages alike, so members that differ share a cluster.
type Compression string

const (
	// CompressionOn compresses each gossip packet and state exchange
	// (memberlist's LZW).
	CompressionOn Compression = "on"
	// CompressionOff sends them as they are.
	CompressionOff Compression = "off"
)

// profile is the defaults a Profile gives Config's gossip fields.
type profile struct {
	ProbeInterval, ProbeTimeout                 time.Duration
	SuspicionMult, SuspicionMaxTimeoutMult      int
	GossipInterval, PushPullInterval            time.Duration
	TCPTimeout                                  time.Duration
	GossipNodes, RetransmitMult, IndirectChecks int
	Compression                                 Compression
}

// defaultsOf returns the defaults of p ("" is ProfileLocal), false for an
// unknown name.
func defaultsOf(p Profile) (profile, bool) {
	switch p {
	case "", ProfileLocal:
		// strata's timing before profiles, on memberlist's local profile
		return profile{ProbeInterval: 500 * time.Millisecond, ProbeTimeout: 250 * time.Millisecond,
			SuspicionMult: 4, SuspicionMaxTimeoutMult: 3, GossipInterval: 100 * time.Millisecond,
			PushPullInterval: 10 * time.Second, TCPTimeout: time.Second,
			GossipNodes: 3, RetransmitMult: 2, IndirectChecks: 1, Compression: CompressionOn}, true
	case ProfileLAN:
		return profile{ProbeInterval: 500 * time.Millisecond, ProbeTimeout: 400 * time.Millisecond,
			SuspicionMult: 3, SuspicionMaxTimeoutMult: 4, GossipInterval: 200 * time.Millisecond,
			PushPullInterval: 30 * time.Second, TCPTimeout: 10 * time.Second,
			GossipNodes: 3, RetransmitMult: 3, IndirectChecks: 2, Compression: CompressionOff}, true
	case ProfileWAN:
		return profile{ProbeInterval: 5 * time.Second, ProbeTimeout: 3 * time.Second,
			SuspicionMult: 6, SuspicionMaxTimeoutMult: 6, GossipInterval: 500 * time.Millisecond,
			PushPullInterval: 60 * time.Second, TCPTimeout: 30 * time.Second,
			GossipNodes: 4, RetransmitMult: 4, IndirectChecks: 3, Compression: CompressionOn}, true
	}
	return profile{}, false
}

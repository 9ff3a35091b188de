// Package membership tells a strata node which nodes are in the cluster,
// whether they are alive, and what each advertises: its gRPC address, its
// tiers' capacity and usage, and an opaque value summary. It wraps
// hashicorp/memberlist (SWIM gossip over UDP, with TCP for state sync) and
// is the only package that imports it.
//
// # Metadata
//
// Each member's Meta rides in memberlist's node metadata, at most
// MaxMetaSize (512) bytes encoded compactly (see wireMeta). Config.Meta is
// read at Start, UpdateMeta and Leave; the others see the change within a
// gossip round or two (milliseconds on loopback). A Summary that does not
// fit is left out, never truncated; SummaryBudget says how much fits.
// Every broadcast reaches every member, so a member that re-advertises
// periodically does it through UpdateMetaPaced, which keeps a cluster of
// more than 32 members to about Config.MetaRate broadcasts a second in
// all: per-member metadata gossip then stays flat as the cluster grows,
// and a change waits up to (n−32)/MetaRate seconds (push-pull may bring it
// sooner).
//
// # Reports
//
// What only one member needs (the eviction coordinator: every node's value
// summaries) does not ride in gossip metadata, which every member holds
// and every push-pull carries: Collect asks members for their
// Config.Report, a packet each way (report.go).
//
// # Profiles and scale
//
// Config.Profile picks memberlist's defaults for the cluster's size and
// network (profiles.go): local up to about fifty members, lan to a few
// thousand in one datacenter, wan across sites. strata-cluster-sim runs
// N members of this package in one process over an in-process Network and
// measured them (docs/design.md §6.7). Three costs grew with N and are
// bounded here: a join exchanges state with Config.JoinFanout seeds, not
// with every seed it is given; reconnection (below) is thinned past 32
// members; metadata re-advertisement is paced (above).
//
// # Failure detection
//
// Each member probes one random peer every ProbeInterval; a probe that
// gets no ack within ProbeTimeout (nor an indirect or TCP ack before the
// next interval) makes the peer Suspect, and an unrefuted suspicion makes
// it Dead after SuspicionMult × max(1, log10(n)) × ProbeInterval, down
// from SuspicionMaxTimeoutMult times that as other members confirm it.
// With the defaults (500 ms, 250 ms, 4, 3) and under ten members, a
// crashed member is declared Dead 2 s after its first failed probe, and
// that probe comes within about n−1 probe intervals: about 2–3.5 s in all.
// The tests measure 2.8–3.4 s for three members on loopback (with -race),
// and about 4 s for a member cut off from both others to declare them Dead.
// memberlist v0.7.0 raises no event on suspicion, so members go from Alive
// straight to Dead here.
//
// # Dead and Left
//
// memberlist reports a death and a graceful leave through the same event,
// without the state that would tell them apart (hashicorp/memberlist#293).
// So Leave first re-advertises the member's metadata with a leaving flag,
// pushes it by push-pull (TCP) to up to leaveSyncPeers live members, and
// only then broadcasts memberlist's leave: the others record it Left as
// soon as the flag arrives (about 0.1 s on loopback), and a member that
// goes away without the flag is Dead. Gossip alone raced the leave message
// (a member that got the leave first held the leaver dead and dropped the
// flag after it: TestLeaveSeenLeftByEveryone). Should the flagged metadata
// still be lost (a member beyond leaveSyncPeers, or unreachable then) and
// the leave message arrive alone, the member is recorded Dead: a graceful
// leave may look like a crash, never the reverse.
//
// # Partitions
//
// memberlist neither probes nor syncs with members it holds dead, so after
// a partition heals the two sides would stay apart forever. Each member
// therefore tries, every ReconnectInterval, to sync with one member it
// holds Dead (not Left), or with its seeds when it sees no live peer; in a
// cluster of n > 32 members, in one interval of n/32 at random, so that the
// cluster makes about 32 attempts per interval whatever its size. The
// first successful sync makes each side refute the other's accusation with
// a higher incarnation, and a round or two later both see everyone Alive
// again: 0.2–1.1 s after the heal in the tests. A member Dead for longer
// than DeadRetention is forgotten and no longer tried.
//
// A member that restarts on the same address takes its old place at its
// first sync. One that restarts on a new address (BindPort 0) is refused
// by the others while they hold its old self alive; it hears of the
// conflict and keeps syncing with live peers until they have declared the
// old self dead, whereupon they take the new address: about 4 s after the
// restart in the tests.
//
// # Settling after a join
//
// A join takes its seed's view, which lacks the members that joined in
// the last few gossip rounds; their alive messages may spend their
// retransmissions before the newcomer is known to those passing them on,
// and memberlist would then tell it of them only at a push-pull (every
// 180 s at a thousand members with ProfileLAN). So a member that joined
// exchanges state once more with a random live member 10 to 20 gossip
// intervals after its join (settle): strata-cluster-sim's start of 100
// members settled in 3.6 s with it, where one view had lacked one member
// for 20-30 s.
//
// Partition is the seam to cut members apart in tests: it filters the
// member's gossip transport, so the protocol runs unchanged.
package membership

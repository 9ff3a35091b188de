package membership

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// State is a member's liveness as this member sees it.
type State int

const (
	// Alive members answer probes.
	Alive State = iota
	// Suspect members failed a probe and may yet refute it. memberlist
	// v0.7.0 raises no event on suspicion, so members are never reported
	// Suspect today: they stay Alive until declared Dead.
	Suspect
	// Dead members stopped answering without leaving (a crash, a
	// partition). Reconnection keeps trying them; they come back Alive if
	// they answer.
	Dead
	// Left members left gracefully (Leave or Close).
	Left
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Member is one member of the cluster as this member sees it.
type Member struct {
	// NodeID is the member's Config.NodeID.
	NodeID string
	// GRPCAddress is Meta.GRPCAddress, repeated for convenience.
	GRPCAddress string
	// GossipAddress is the member's gossip endpoint (host:port): what
	// Seeds, Join and Partition.Block take.
	GossipAddress string
	// State is the member's liveness.
	State State
	// Meta is the metadata the member last advertised.
	Meta Meta
	// Incarnation is the version of the member's metadata: 1 from Start,
	// one more at each UpdateMeta and at Leave. It restarts from 1 when
	// the member restarts. (memberlist keeps its own incarnation numbers
	// to itself, so this is strata's.)
	Incarnation uint32
}

// Membership is this process's member of the cluster: it gossips this
// member's metadata, tracks the others' and detects failures. It is safe
// for concurrent use. Start creates one; Close (or Leave, or Shutdown)
// ends it.
type Membership struct {
	cfg        Config
	log        *slog.Logger
	ml         *memberlist.Memberlist
	gossipAddr string
	seeds      []string            // cfg.Seeds less this member's own address
	ring       *memberlist.Keyring // nil without Config.Keys; safe for concurrent use

	leaving atomic.Bool // NodeMeta sets the leaving flag
	// resyncUntil (unix ns) is when reconnect stops syncing with live
	// peers after a name conflict (see NotifyConflict).
	resyncUntil atomic.Int64
	version     atomic.Uint32 // the last meta version NodeMeta wrote

	// metaMu guards lastMeta and metaErr, written by NodeMeta.
	metaMu   sync.Mutex
	lastMeta []byte // the last encoding that fit
	metaErr  error  // from NodeMeta's last call

	// updateMu serialises UpdateMeta, so that it reads the metaErr of its
	// own NodeMeta call, and guards lastUpdate.
	updateMu   sync.Mutex
	lastUpdate time.Time // UpdateMeta's last broadcast; zero: none since Start

	started time.Time // when Start joined
	phase   float64   // in [0, 1): where in the pace gap Start's metadata counts (UpdateMetaPaced)

	// lifeMu guards stopped. It is held shared around every call into
	// memberlist that must not follow Shutdown (a Leave after Shutdown
	// panics), and exclusively to leave and shut down.
	lifeMu  sync.RWMutex
	stopped bool

	// mu guards members, subs and nextSub. memberlist calls the hooks
	// that take it with its own node lock held, so nothing done under mu
	// may call into memberlist.
	mu      sync.Mutex
	members map[string]*entry     // by NodeID
	subs    map[int]chan struct{} // nil once stopped
	nextSub int

	// askMu guards asks: the Collects waiting for answers, by ask id.
	askMu   sync.Mutex
	asks    map[uint64]chan<- answer
	nextAsk atomic.Uint64

	stop chan struct{} // closed to stop reconnectLoop
	wg   sync.WaitGroup
}

// entry is a member and when its State last changed.
type entry struct {
	Member
	changed time.Time
}

// broadcastTimeout bounds UpdateMeta's wait for its broadcast when its
// context has no deadline; closeLeaveTimeout bounds Close's leave.
const (
	broadcastTimeout  = 5 * time.Second
	closeLeaveTimeout = time.Second
)

// Start creates this member, listening on Config.BindAddr:BindPort, and
// joins Config.Seeds, retrying until one answers, ctx is done or
// Config.JoinTimeout has passed. If no seed answered it fails with
// ErrNoSeed unless Config.AllowAlone is set, in which case it starts alone
// and keeps trying the seeds in the background.
func Start(ctx context.Context, cfg Config) (*Membership, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("starting membership: %w", err)
	}
	if SummaryBudget(cfg.Meta()) < 0 {
		return nil, fmt.Errorf("starting membership %s: metadata without summary: %w", cfg.NodeID, ErrMetaTooLarge)
	}
	m := &Membership{
		cfg:     cfg,
		log:     cfg.Logger.With("node", cfg.NodeID),
		members: make(map[string]*entry),
		subs:    make(map[int]chan struct{}),
		asks:    make(map[uint64]chan<- answer),
		stop:    make(chan struct{}),
	}
	stdlog := newStdLogger(m.log)
	tr, port, err := newTransport(cfg, stdlog)
	if err != nil {
		return nil, fmt.Errorf("starting membership %s: %w", cfg.NodeID, err)
	}
	ml, err := memberlist.Create(m.memberlistConfig(tr, port, stdlog))
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("starting membership %s: %w", cfg.NodeID, err)
	}
	m.ml = ml
	m.gossipAddr = ml.LocalNode().Address()
	m.seeds = m.others(cfg.Seeds)

	if len(m.seeds) > 0 {
		jctx, cancel := context.WithTimeout(ctx, cfg.JoinTimeout)
		_, err := m.Join(jctx, m.seeds)
		cancel()
		if err != nil && (!cfg.AllowAlone || ctx.Err() != nil) {
			_ = m.Shutdown()
			return nil, fmt.Errorf("starting membership %s: %w", cfg.NodeID, err)
		}
		if err != nil {
			m.log.Warn("starting alone; will keep trying the seeds", "err", err)
		}
	}
	m.started, m.phase = time.Now(), rand.Float64()
	m.wg.Add(1)
	go m.reconnectLoop()
	return m, nil
}

// memberlistConfig sets memberlist's loopback defaults to Config's
// timing (its Profile's unless set).
func (m *Membership) memberlistConfig(tr memberlist.NodeAwareTransport, port int, stdlog *log.Logger) *memberlist.Config {
	cfg := m.cfg
	mc := memberlist.DefaultLocalConfig()
	mc.Name = cfg.NodeID
	mc.Transport = tr
	mc.BindAddr, mc.BindPort = cfg.BindAddr, port
	mc.AdvertiseAddr, mc.AdvertisePort = cfg.AdvertiseAddr, port
	mc.ProbeInterval = cfg.ProbeInterval
	mc.ProbeTimeout = cfg.ProbeTimeout
	mc.SuspicionMult = cfg.SuspicionMult
	mc.SuspicionMaxTimeoutMult = cfg.SuspicionMaxTimeoutMult
	mc.GossipInterval = cfg.GossipInterval
	mc.PushPullInterval = cfg.PushPullInterval
	mc.TCPTimeout = cfg.TCPTimeout
	mc.GossipNodes = cfg.GossipNodes
	mc.RetransmitMult = cfg.RetransmitMult
	mc.IndirectChecks = cfg.IndirectChecks
	mc.EnableCompression = cfg.Compression == CompressionOn
	// A member whose probes keep failing suspects itself and slows its
	// probing by up to this factor; memberlist's 8 would let a member cut
	// off from everyone probe once per 4 s (default ProbeInterval) and so
	// take that much longer to see the partition.
	mc.AwarenessMaxMultiplier = 4
	// Keep gossiping to the dead (so they can refute) for as long as it
	// takes to declare them dead, several times over.
	mc.GossipToTheDeadTime = 10 * time.Duration(cfg.SuspicionMult) * cfg.ProbeInterval
	// A member that restarts on another address (BindPort 0) may take its
	// old name as soon as the old one is Dead. Without this memberlist
	// rejects it as a conflict until it forgets the dead one.
	mc.DeadNodeReclaimTime = cfg.ProbeInterval
	h := hooks{m}
	mc.Delegate = h
	mc.Events = h
	mc.Conflict = h
	mc.Logger = stdlog
	if len(cfg.Keys) > 0 {
		ring, err := memberlist.NewKeyring(cfg.Keys[1:], cfg.Keys[0])
		if err == nil { // the keys were checked by withDefaults
			mc.Keyring, m.ring = ring, ring
			mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
		}
	}
	return mc
}

// SetKeys replaces the gossip keys of a member started with Config.Keys:
// keys[0] encrypts from now on, the others still decrypt, the rest are
// forgotten. A member started without keys gossips in clear and cannot
// start encrypting (ErrInvalidConfig).
func (m *Membership) SetKeys(keys [][]byte) error {
	ring := m.ring
	if ring == nil || len(keys) == 0 {
		return fmt.Errorf("setting gossip keys: a member without keys cannot take some, nor one with keys none: %w", ErrInvalidConfig)
	}
	for i, k := range keys {
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return fmt.Errorf("gossip key %d is %d bytes, not 16, 24 or 32: %w", i, l, ErrInvalidConfig)
		}
	}
	for _, k := range keys {
		if err := ring.AddKey(k); err != nil {
			return fmt.Errorf("adding a gossip key: %w", err)
		}
	}
	if err := ring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("using a gossip key: %w", err)
	}
	for _, old := range ring.GetKeys() {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, old) }) {
			if err := ring.RemoveKey(old); err != nil {
				return fmt.Errorf("removing a gossip key: %w", err)
			}
		}
	}
	return nil
}

// GossipAddress returns this member's gossip endpoint (host:port), the
// address others put in their Seeds.
func (m *Membership) GossipAddress() string { return m.gossipAddr }

// Members returns every member known, this one included, sorted by
// NodeID: Alive ones and those Dead or Left within Config.DeadRetention.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(time.Now())
	out := make([]Member, 0, len(m.members))
	for _, e := range m.members {
		mem := e.Member
		mem.Meta = mem.Meta.clone()
		out = append(out, mem)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}

// Member returns the member id as this member sees it, and whether it is
// known (Alive, or Dead or Left within Config.DeadRetention). Unlike
// Members it costs the same whatever the cluster's size.
func (m *Membership) Member(id string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.members[id]
	if !ok || ((e.State == Dead || e.State == Left) && time.Since(e.changed) > m.cfg.DeadRetention) {
		return Member{}, false
	}
	mem := e.Member
	mem.Meta = mem.Meta.clone()
	return mem, true
}

// Alive returns the members that are Alive or Suspect, this one included,
// sorted by NodeID. Suspect members count as alive: a suspect may well
// refute, and a page owner that does turn out dead costs a miss, not an
// error, whereas dropping suspects would move pages on every hiccup.
func (m *Membership) Alive() []Member {
	return slices.DeleteFunc(m.Members(), func(mem Member) bool {
		return mem.State != Alive && mem.State != Suspect
	})
}

// Subscribe returns a channel that receives a signal after every change to
// the members or their metadata. Signals are coalesced (the channel has
// room for one): on a signal, read Members again. The channel is closed by
// the returned func, which unsubscribes, and when the Membership stops.
func (m *Membership) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		close(ch)
		return ch, func() {}
	}
	id := m.nextSub
	m.nextSub++
	m.subs[id] = ch
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if c, ok := m.subs[id]; ok {
			delete(m.subs, id)
			close(c)
		}
	}
}

// signalLocked wakes every subscriber.
func (m *Membership) signalLocked() {
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// UpdateMeta re-reads Config.Meta and broadcasts it, waiting until the
// broadcast has gone out or ctx is done (5 s if ctx has no deadline). If
// the metadata is too large it returns an error wrapping ErrMetaTooLarge;
// see there for what was sent.
func (m *Membership) UpdateMeta(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("updating metadata: %w", err)
	}
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.stopped {
		return fmt.Errorf("updating metadata: %w", ErrClosed)
	}
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	timeout := m.cfg.scaled(broadcastTimeout)
	if d, ok := ctx.Deadline(); ok {
		timeout = positive(time.Until(d))
	}
	m.lastUpdate = time.Now()
	err := m.ml.UpdateNode(timeout)
	m.metaMu.Lock()
	merr := m.metaErr
	m.metaMu.Unlock()
	if merr != nil {
		return fmt.Errorf("updating metadata: %w", merr)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("updating metadata: broadcast: %w", err)
	}
	return nil
}

// UpdateMetaPaced is UpdateMeta at this member's share of the cluster's
// metadata broadcasts (Config.MetaRate): it broadcasts only when the last
// broadcast is at least (n−32)/MetaRate seconds old, n the members known
// (so always in a cluster of up to 32), and otherwise returns nil at once. A node re-advertises its tier usage and
// value summaries every few seconds; every broadcast must reach every
// member, each member passing it on RetransmitMult × log10(n) times, so
// unpaced a thousand members would each take in about 2.7 MB/s of
// metadata (memberlist would cap it at its gossip rate and let the rest go
// stale). The changes skipped still reach the others by the periodic
// push-pull, and by the next paced broadcast. The metadata Start sent
// counts as a broadcast at a random point of the first gap.
func (m *Membership) UpdateMetaPaced(ctx context.Context) error {
	m.mu.Lock()
	n := len(m.members)
	m.mu.Unlock()
	gap := paceGap(n, m.cfg.MetaRate)
	m.updateMu.Lock()
	last := m.lastUpdate
	if last.IsZero() {
		// Start's metadata went out with the join: it counts as a
		// broadcast at a random point of the gap, so that members started
		// together do not all re-advertise at their first paced update,
		// and then fall silent together for a whole gap.
		last = m.started.Add(-time.Duration(m.phase * float64(gap)))
	}
	recent := time.Since(last) < gap
	m.updateMu.Unlock()
	if recent {
		return nil
	}
	return m.UpdateMeta(ctx)
}

// paceGap is the least time between one member's paced broadcasts in a
// cluster of n members keeping to rate broadcasts a second.
func paceGap(n int, rate float64) time.Duration {
	return time.Duration(float64(max(n-unpacedMembers, 0)) / rate * float64(time.Second))
}

// unpacedMembers is the cluster size up to which UpdateMetaPaced always
// broadcasts (memberlist's own threshold for stretching push-pulls).
const unpacedMembers = 32

// Join contacts seeds (gossip endpoints, host:port), Config.JoinFanout at a
// time in a random order, and exchanges state with those of the first
// group any of which answers, retrying until one does or ctx is done. It
// returns how many answered. This member's own address is skipped; with no
// other seed Join returns 0, nil. One round of attempts may outlast ctx by
// Config.TCPTimeout per seed tried.
func (m *Membership) Join(ctx context.Context, seeds []string) (int, error) {
	seeds = m.others(seeds)
	if len(seeds) == 0 {
		return 0, nil
	}
	backoff := 50 * time.Millisecond
	var last error
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("joining %v: %w (%w; last failure: %v)", seeds, ErrNoSeed, err, last)
		}
		n, err := m.joinOnce(seeds)
		if n > 0 {
			return n, nil
		}
		if errors.Is(err, ErrClosed) {
			return 0, fmt.Errorf("joining %v: %w", seeds, err)
		}
		last = err
		m.log.Debug("join attempt failed", "seeds", seeds, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// joinOnce makes one round of join attempts: the seeds in a random order,
// Config.JoinFanout at a time, until a group reaches any. Each seed that
// answers sends the whole membership, so a node that names every
// registered node as its seeds (a thousand of them) exchanges state with a
// few, not all, and joins do not all land on the first seeds listed.
func (m *Membership) joinOnce(seeds []string) (int, error) {
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.stopped {
		return 0, ErrClosed
	}
	seeds = slices.Clone(seeds)
	rand.Shuffle(len(seeds), func(i, j int) { seeds[i], seeds[j] = seeds[j], seeds[i] })
	var errs error
	for len(seeds) > 0 {
		group := seeds[:min(m.cfg.JoinFanout, len(seeds))]
		seeds = seeds[len(group):]
		n, err := m.ml.Join(group)
		if n > 0 {
			return n, nil
		}
		errs = errors.Join(errs, err)
	}
	return 0, errs
}

// others returns addrs less this member's own gossip address.
func (m *Membership) others(addrs []string) []string {
	self := canonicalAddr(m.gossipAddr)
	return slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return canonicalAddr(a) == self })
}

// Leave tells the cluster this member is leaving, so that the others see
// it Left rather than Dead, then shuts it down. timeout bounds the wait for
// the two broadcasts (the metadata marked leaving, then memberlist's
// leave); Leave shuts down even when they time out, and then returns the
// timeout error. Leave after the Membership stopped returns ErrClosed.
func (m *Membership) Leave(timeout time.Duration) error {
	return m.stopWith(func() error { return m.leave(timeout) })
}

// leave broadcasts the leave; stopWith calls it with lifeMu held. The
// first broadcast gets half the time, so that it can't starve the second.
//
// memberlist's wait for a broadcast ends when the message has been sent
// often enough, and it is only sent to live members: if the last other
// member leaves meanwhile (the whole cluster shutting down), the wait runs
// to its timeout. A timeout with no live member left is therefore no
// error: there is no one left to tell.
func (m *Membership) leave(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	// Mark the metadata leaving first: memberlist's own leave message
	// reaches the others' event hooks indistinguishable from a death
	// (hashicorp/memberlist#293); the flag tells them apart.
	m.leaving.Store(true)
	err := m.ml.UpdateNode(positive(time.Until(deadline) / 2))
	if err != nil && m.livePeers() == 0 {
		err = nil
	}
	// UpdateNode's wait ends when the gossip was sent often enough, not
	// when every member has it; a member that gets memberlist's leave
	// first holds the member dead at that incarnation and drops the flag
	// that follows (seen Dead by one of four peers in most leaves). So the
	// flag also goes by push-pull, over TCP, to up to leaveSyncPeers live
	// members before the leave message.
	m.syncLeaving(deadline)
	if lerr := m.ml.Leave(positive(time.Until(deadline))); lerr != nil && m.livePeers() > 0 {
		err = errors.Join(err, lerr)
	}
	if err != nil {
		return fmt.Errorf("leaving: %w", err)
	}
	return nil
}

// leaveSyncPeers bounds the members a leaving member pushes its leaving
// flag to directly (push-pull); in a larger cluster the rest learn it by
// gossip, whose fan-out then reaches them first far more often.
const leaveSyncPeers = 32

// syncLeaving pushes this member's state (its metadata marked leaving) to
// up to leaveSyncPeers live members by push-pull, in the first half of
// what is left until deadline; a member that cannot be reached is left to
// gossip.
func (m *Membership) syncLeaving(deadline time.Time) {
	// This member's own view, not memberlist's Members(), whose nodes
	// memberlist keeps writing to.
	var addrs []string
	m.mu.Lock()
	for id, e := range m.members {
		if id != m.cfg.NodeID && e.State == Alive && e.GossipAddress != "" && len(addrs) < leaveSyncPeers {
			addrs = append(addrs, e.GossipAddress)
		}
	}
	m.mu.Unlock()
	if len(addrs) == 0 {
		return
	}
	// One push-pull per member, all at once: memberlist's Join contacts its
	// addresses one after another, up to its TCPTimeout (1 s) each.
	// stopWith waits for them (each ends within that timeout).
	var pushed sync.WaitGroup
	for _, a := range addrs {
		pushed.Add(1)
		m.wg.Go(func() {
			defer pushed.Done()
			_, _ = m.ml.Join([]string{a}) // the other merges our state
		})
	}
	done := make(chan struct{})
	m.wg.Go(func() {
		pushed.Wait()
		close(done)
	})
	select {
	case <-done:
	case <-time.After(positive(time.Until(deadline) / 2)):
		m.log.Warn("leaving: pushing the leaving flag to the members ran out of time; gossip carries it")
	}
}

// livePeers returns how many other members memberlist holds alive or
// suspect.
func (m *Membership) livePeers() int {
	n := 0
	for _, node := range m.ml.Members() {
		if node.Name != m.cfg.NodeID {
			n++
		}
	}
	return n
}

// Shutdown stops this member without telling the others, as a crash
// would: they declare it Dead after the failure-detection time. It
// returns nil, also when the Membership has already stopped.
func (m *Membership) Shutdown() error {
	if err := m.stopWith(nil); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// Close leaves (waiting at most 1 s for the broadcasts) unless the
// Membership has already stopped, shuts it down and waits for the
// goroutines this package started. It is idempotent; only the first call
// can return an error, from the leave.
func (m *Membership) Close() error {
	err := m.stopWith(func() error { return m.leave(m.cfg.scaled(closeLeaveTimeout)) })
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// stopWith runs leave (if not nil) then shuts memberlist down, stops the
// reconnect loop and closes the subscriptions. It returns ErrClosed if the
// Membership had already stopped.
func (m *Membership) stopWith(leave func() error) error {
	m.lifeMu.Lock()
	if m.stopped {
		m.lifeMu.Unlock()
		return ErrClosed
	}
	m.stopped = true
	var err error
	if leave != nil {
		err = leave()
	}
	if serr := m.ml.Shutdown(); serr != nil {
		err = errors.Join(err, fmt.Errorf("shutting down memberlist: %w", serr))
	}
	m.lifeMu.Unlock()

	close(m.stop)
	m.wg.Wait()
	m.mu.Lock()
	for _, ch := range m.subs {
		close(ch)
	}
	m.subs = nil
	m.mu.Unlock()
	return err
}

// reconnectLoop tries, every ReconnectInterval, to sync with one Dead
// member, or the seeds when no peer is alive: memberlist neither probes
// nor syncs with members it holds dead, so without this the two sides of a
// healed partition would never merge. After a name conflict (see
// NotifyConflict) it syncs with a live member instead.
func (m *Membership) reconnectLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.ReconnectInterval)
	defer t.Stop()
	settle := time.NewTimer(m.settleAfter())
	defer settle.Stop()
	if len(m.seeds) == 0 {
		settle.Stop() // the first member: nothing to have missed
	}
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.reconnect()
		case <-settle.C:
			m.settle()
		}
	}
}

// settleGossips bounds when a member that joined syncs once more: at a
// random point between settleGossips and twice that many gossip
// intervals after its join.
const settleGossips = 10

// settleAfter is when, after Start, this member syncs once more (settle).
func (m *Membership) settleAfter() time.Duration {
	d := settleGossips * m.cfg.GossipInterval
	return d + rand.N(d)
}

// settle exchanges state once with a random live member, a few gossip
// rounds after this member joined. A join takes its seed's view, which
// lacks the members that joined within the last gossip rounds; their
// alive messages may then have spent their retransmissions before this
// member was known to the gossipers, and without this it would learn of
// them only at a push-pull (every 180 s at a thousand members with
// ProfileLAN): strata-cluster-sim's starts at 100 members kept one view
// short of one member for 20-30 s.
func (m *Membership) settle() {
	_, alive := m.reconnectTargets()
	if len(alive) == 0 {
		return
	}
	target := alive[rand.IntN(len(alive))]
	if _, err := m.joinOnce([]string{target}); err != nil && !errors.Is(err, ErrClosed) {
		m.log.Debug("settling sync failed", "addr", target, "err", err)
	}
}

// reconnectScale is the cluster size past which a member skips reconnect
// rounds: with n members it takes one round in n/reconnectScale, so that
// the cluster makes about reconnectScale attempts per ReconnectInterval
// whatever its size. Each attempt may carry the whole membership (a
// push-pull), and each round reads it: a thousand members each syncing
// with a member they held dead every second moved hundreds of megabytes a
// second and starved their own probes (strata-cluster-sim, issue 45).
const reconnectScale = 32

func (m *Membership) reconnect() {
	resync := time.Now().UnixNano() < m.resyncUntil.Load()
	if !resync {
		m.mu.Lock()
		n := len(m.members)
		m.mu.Unlock()
		if n > reconnectScale && rand.IntN(n) >= reconnectScale {
			return
		}
	}
	dead, alive := m.reconnectTargets()
	targets := dead
	if resync {
		targets = alive
	}
	if len(targets) == 0 {
		return
	}
	target := targets[rand.IntN(len(targets))]
	n, err := m.joinOnce([]string{target})
	if n > 0 {
		m.log.Debug("synced", "addr", target)
	} else if err != nil && !errors.Is(err, ErrClosed) {
		m.log.Debug("sync failed", "addr", target, "err", err)
	}
}

// reconnectTargets returns the gossip addresses of Dead members (plus the
// seeds if no other member is alive) and of live ones.
func (m *Membership) reconnectTargets() (dead, alive []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(time.Now())
	for _, e := range m.members {
		if e.NodeID == m.cfg.NodeID {
			continue
		}
		switch e.State {
		case Alive, Suspect:
			alive = append(alive, e.GossipAddress)
		case Dead:
			dead = append(dead, e.GossipAddress)
		}
	}
	if len(alive) == 0 {
		dead = append(dead, m.seeds...)
	}
	return dead, alive
}

// resyncWindow bounds how long the others may take to declare a member
// dead: the longest suspicion plus two probe intervals.
func (m *Membership) resyncWindow() time.Duration {
	c := m.cfg
	return time.Duration(c.SuspicionMult*c.SuspicionMaxTimeoutMult+2) * c.ProbeInterval
}

// pruneLocked forgets members Dead or Left for longer than DeadRetention.
func (m *Membership) pruneLocked(now time.Time) {
	for id, e := range m.members {
		if (e.State == Dead || e.State == Left) && now.Sub(e.changed) > m.cfg.DeadRetention {
			delete(m.members, id)
		}
	}
}

// positive returns d, or the least positive duration: memberlist reads a
// zero timeout as "wait forever".
func positive(d time.Duration) time.Duration {
	return max(d, time.Nanosecond)
}

// newTransport binds memberlist's UDP+TCP transport (or attaches to
// cfg's Network), wrapped in cfg's
// Partition if any, and returns it with the port it bound. With BindPort 0
// the kernel picks the TCP port and UDP binds the same number, which can
// collide; that is retried.
func newTransport(cfg Config, lg *log.Logger) (memberlist.NodeAwareTransport, int, error) {
	if cfg.Network != nil {
		t := cfg.Network.attach()
		return withPartition(t, cfg.Partition), t.port(), nil
	}
	tries := 1
	if cfg.BindPort == 0 {
		tries = 10
	}
	var nt *memberlist.NetTransport
	var err error
	for range tries {
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{cfg.BindAddr},
			BindPort:  cfg.BindPort,
			Logger:    lg,
		})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("binding gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	return withPartition(nt, cfg.Partition), nt.GetAutoBindPort(), nil
}

// withPartition wraps t in p, if p is not nil.
func withPartition(t memberlist.NodeAwareTransport, p *Partition) memberlist.NodeAwareTransport {
	if p == nil {
		return t
	}
	return newPartitionTransport(t, p)
}

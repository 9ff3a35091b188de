package store

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Config configures a Store. Zero fields take their defaults.
type Config struct {
	// Tiers is the ordered list of tiers pages land in, fastest first.
	// Required: at least one.
	Tiers []tiers.Tier
	// DefaultLeaseTTL is the lease length when a request names none.
	// Default 10s.
	DefaultLeaseTTL time.Duration
	// MaxLeaseTTL caps the length a request may ask for. Default 60s.
	MaxLeaseTTL time.Duration
	// MaxLeasesPerTenant caps the active leases of one tenant. Default 4096.
	MaxLeasesPerTenant int
	// ReserveTTL is how long a reservation lives when the request names no
	// deadline. Default 30s, or MaxReserveTTL when that is shorter.
	ReserveTTL time.Duration
	// MaxReserveTTL caps the deadline a request may ask for. Default 5m;
	// below ReserveTTL is an error.
	MaxReserveTTL time.Duration
	// ReserveShare is the most of each tier (of its capacity at New) that
	// one tenant's open reservations may hold there, every tenant's, with
	// a Quota or without (quota.go, "The reservation share"): a page that
	// would take a tenant past it in a tier goes to the next tier, and
	// one past it in every tier is Rejected with ErrQuota. Default
	// DefaultReserveShare; outside (0, 1] is an error (1: no bound but
	// the tier's).
	ReserveShare float64
	// RecentOutcomes is how many finished write ids and expired lease ids are
	// remembered for idempotent answers. Default 65536.
	RecentOutcomes int
	// JanitorInterval is how often expired reservations and leases are
	// reclaimed. Default 250ms.
	JanitorInterval time.Duration
	// Logger receives the store's logs. Default: discard.
	Logger *slog.Logger
	// Eviction is the policy each tier's pages are demoted and dropped by.
	// Default eviction.KindCost (leaf-first, recompute-cost weighted).
	// Plain variants are refused: they would break invariant 5.
	Eviction eviction.Kind
	// Tuning departs from the shipped policy, for experiments. Default
	// zero: the shipped policy.
	Tuning EvictionTuning
	// OnRemoteParent, when set, receives batches of hints about pages whose
	// parent is not resident on this node (see ChildHint), for the node to
	// forward to the parent's owner. It is called from the store's own
	// goroutine every few milliseconds, never under the store's lock.
	// Default: none.
	OnRemoteParent func([]ChildHint)
	// OnEvent, when set, receives each change of the store's contents
	// (events.go: a page stored or removed, a namespace dropped), in the
	// order they happen. It is called under the store's lock: it must not
	// block nor call the store. Default: none.
	OnEvent func(Event)
	// OrphanGrace is how long after its last put (its commit, or a
	// Reserve answered EXISTS) a page whose parent is reported gone
	// (ParentsGone) is only marked as an orphan instead of dropped: a parent dropped and put again while its notice was in
	// flight must not cost its children. Page times are whole seconds, so
	// a page is spared for between OrphanGrace and a second more. Default
	// 1s; negative: none.
	OrphanGrace time.Duration
	// LookupBookkeeping is the most of the node's CPU time (GOMAXPROCS, as
	// New finds it, × wall time) that lease-less lookups' bookkeeping (the
	// frequency histories, the pages' hits, the queues' order) may take
	// under load: past it, lookups shed theirs and answer from the index
	// alone (hitlog.go, "A budget for the bookkeeping"). Default 0.25;
	// negative: no budget.
	LookupBookkeeping float64
}

func (c *Config) setDefaults() error {
	if len(c.Tiers) == 0 || len(c.Tiers) > MaxTiers {
		return fmt.Errorf("store: %d tiers, want 1 to %d", len(c.Tiers), MaxTiers)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DefaultLeaseTTL, 10*time.Second)
	def(&c.MaxLeaseTTL, time.Minute)
	def(&c.MaxReserveTTL, 5*time.Minute)
	def(&c.ReserveTTL, min(30*time.Second, c.MaxReserveTTL))
	def(&c.JanitorInterval, 250*time.Millisecond)
	if c.OrphanGrace == 0 {
		c.OrphanGrace = time.Second
	}
	switch b := c.LookupBookkeeping; {
	case b == 0:
		c.LookupBookkeeping = 0.25
	case math.IsNaN(b) || math.IsInf(b, 0):
		return fmt.Errorf("store: lookup bookkeeping budget %v, want a share of the CPU time (negative: none)", b)
	}
	if err := c.Tuning.Validate(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if c.DefaultLeaseTTL > c.MaxLeaseTTL {
		return fmt.Errorf("store: default lease TTL %v exceeds the maximum %v", c.DefaultLeaseTTL, c.MaxLeaseTTL)
	}
	if c.ReserveTTL > c.MaxReserveTTL {
		return fmt.Errorf("store: default reservation TTL %v exceeds the maximum %v", c.ReserveTTL, c.MaxReserveTTL)
	}
	if c.ReserveShare == 0 {
		c.ReserveShare = DefaultReserveShare
	}
	if !(c.ReserveShare > 0 && c.ReserveShare <= 1) { // NaN too
		return fmt.Errorf("store: reserve share %v, want a share of each tier in (0, 1]", c.ReserveShare)
	}
	if c.MaxLeasesPerTenant <= 0 {
		c.MaxLeasesPerTenant = 4096
	}
	if c.RecentOutcomes <= 0 {
		c.RecentOutcomes = 65536
	}
	if c.Eviction == "" {
		c.Eviction = eviction.KindCost
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Namespace is what the store needs to know of a namespace.
type Namespace struct {
	ID        namespace.ID
	Tenant    string
	PageBytes int64
	Checksum  namespace.Checksum
	// PageTokens is the tokens a page holds; 0 = unknown (eviction then
	// prices pages with its default profile).
	PageTokens uint32
	// FLOPsLinear and FLOPsQuadratic price a prefill over s tokens as
	// FLOPsLinear·s + FLOPsQuadratic·s² (namespace.Descriptor.PrefillFLOPs):
	// what a page at depth d saves is the difference between the prefill up
	// to its end and up to its start. Zero = unknown.
	FLOPsLinear, FLOPsQuadratic float64
}

// Store holds the pages of one node. It is safe for concurrent use.
type Store struct {
	cfg    Config
	log    *slog.Logger
	closed atomic.Bool

	nsMu sync.RWMutex
	ns   map[namespace.ID]*nsState // guarded by nsMu

	// mu guards everything below it and the lifecycle fields of entries
	// (pins, leases, dead, recency links) and of reservations (the map).
	mu sync.Mutex
	// hits is a lookup's bookkeeping left to the applier (hitlog.go):
	// every section under mu takes it through lock, which applies it first.
	hits          hitLog
	hitWake       chan struct{} // the log has a batch
	policy        policyState
	reservations  map[uint64]*reservation
	leases        map[uint64]*lease
	tenantLeases  map[string]int
	quotas        map[string]Quota      // guarded by mu; SetQuotas replaces it
	usage         map[string]*tenantUse // guarded by mu: pages and reservations per tenant
	reserveCap    [MaxTiers]int64       // per tier: the bytes one tenant may hold reserved there; set by New
	writeOutcomes *recent[writeOutcome]
	expiredLeases *recent[struct{}]
	pages         int64
	bytes         int64
	lastSweep     time.Time
	handing       bool // Handed is removing pages: no parent-gone notices

	evictions atomic.Uint64 // pages dropped to make room
	demotions atomic.Uint64 // pages moved one tier down
	corrupt   atomic.Uint64 // pages dropped because they failed to read or verify
	moverWake chan struct{}
	hintWake  chan struct{} // child hints are pending (hintLocked)
	flushMu   sync.Mutex    // held while hints are handed over (flushHints)
	moveBufs  [2][]byte     // the mover's copy buffers (source, read-back); the mover's own
	spill     []atomic.Bool // per tier: a page landed below it

	epoch time.Time // zero of the store clock

	stop chan struct{}
	wg   sync.WaitGroup // janitor and mover
}

// clock is t in whole seconds since the store started (negative before),
// the resolution page times are kept at.
func (s *Store) clock(t time.Time) int32 {
	return int32(t.Sub(s.epoch) / time.Second)
}

// timeOf converts a store clock reading back to a time.
func (s *Store) timeOf(c int32) time.Time {
	return s.epoch.Add(time.Duration(c) * time.Second)
}

// New builds a store over cfg.Tiers and starts its janitor.
func New(cfg Config) (*Store, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:           cfg,
		log:           cfg.Logger,
		ns:            make(map[namespace.ID]*nsState),
		reservations:  make(map[uint64]*reservation),
		leases:        make(map[uint64]*lease),
		tenantLeases:  make(map[string]int),
		usage:         make(map[string]*tenantUse),
		writeOutcomes: newRecent[writeOutcome](cfg.RecentOutcomes),
		expiredLeases: newRecent[struct{}](cfg.RecentOutcomes),
		moverWake:     make(chan struct{}, 1),
		hitWake:       make(chan struct{}, 1),
		hintWake:      make(chan struct{}, 1),
		spill:         make([]atomic.Bool, len(cfg.Tiers)),
		stop:          make(chan struct{}),
		epoch:         time.Now(),
	}
	for i, t := range cfg.Tiers {
		s.reserveCap[i] = int64(cfg.ReserveShare * float64(t.Stats().Capacity))
		if cfg.ReserveShare == 1 {
			s.reserveCap[i] = math.MaxInt64 // the tier's room is the only bound
		}
	}
	s.hits.budget(cfg.LookupBookkeeping, runtime.GOMAXPROCS(0), time.Now())
	if err := s.initPolicy(); err != nil {
		return nil, err
	}
	s.wg.Add(4)
	go s.loop(s.cfg.JanitorInterval, nil, s.expire) // the janitor
	go s.mover()
	go s.hinter()
	go s.loop(0, s.hitWake, s.applyHitLog) // the applier
	return s, nil
}

// Close stops the janitor, drops every reservation and lease and frees their
// memory. Published pages stay in the tiers, which the caller closes.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.wg.Wait()
	s.lock()
	defer s.unlock()
	for id, r := range s.reservations {
		s.dropReservationLocked(id, r, CommitAborted)
	}
	for id, l := range s.leases {
		s.endLeaseLocked(id, l)
	}
	return nil
}

// AddNamespace makes a namespace known to the store. Adding the same
// namespace again is a no-op; adding an ID with different parameters fails.
func (s *Store) AddNamespace(n Namespace) error {
	if n.PageBytes <= 0 {
		return fmt.Errorf("adding namespace %s: page size %d: %w", n.ID.Short(), n.PageBytes, ErrBadSize)
	}
	if n.Checksum == 0 {
		n.Checksum = namespace.CRC32C
	}
	s.lock() // completing a placeholder changes a tenant leases read under mu
	defer s.unlock()
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if old, ok := s.ns[n.ID]; ok {
		if old.placeholder && old.PageBytes == n.PageBytes && old.Checksum == n.Checksum {
			old.Tenant, old.placeholder = n.Tenant, false
			return nil
		}
		if old.Namespace != n {
			return fmt.Errorf("adding namespace %s: already present with other parameters", n.ID.Short())
		}
		return nil
	}
	s.ns[n.ID] = newNSState(n)
	s.sizeQueuesLocked(n.PageBytes)
	return nil
}

// Namespace returns a known namespace.
func (s *Store) Namespace(id namespace.ID) (Namespace, bool) {
	n, err := s.namespace(id)
	if err != nil {
		return Namespace{}, false
	}
	return n.Namespace, true
}

func (s *Store) namespace(id namespace.ID) (*nsState, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.nsMu.RLock()
	n, ok := s.ns[id]
	s.nsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("namespace %s: %w", id.Short(), ErrNamespaceNotFound)
	}
	return n, nil
}

// lockNamespace is namespace, returning with s's lock taken (lock) when it
// finds the namespace: the caller unlocks.
func (s *Store) lockNamespace(id namespace.ID) (*nsState, error) {
	n, err := s.namespace(id)
	if err == nil {
		s.lock()
	}
	return n, err
}

// newIDLocked returns a fresh write or lease id: 64 random bits (never 0,
// never an id in use), so that no client can name a lease or reservation
// it was not given by guessing near its own, as sequential ids allowed
// (and a restarted node does not reuse recent ones).
func (s *Store) newIDLocked() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		id := binary.LittleEndian.Uint64(b[:])
		if _, used := s.leases[id]; id != 0 && !used && s.reservations[id] == nil {
			return id
		}
	}
}

// loop is the body of a goroutine of s (counted in s.wg): until Close, it
// calls f each time wake fires and, when every is not zero, on a tick every
// that long, with the tick's time (or the time it woke). The janitor, which
// reclaims expired reservations and leases, the mover and the hit log's
// applier run on it.
func (s *Store) loop(every time.Duration, wake <-chan struct{}, f func(now time.Time)) {
	defer s.wg.Done()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		var now time.Time
		select {
		case <-s.stop:
			return
		case <-wake:
			now = time.Now()
		case now = <-tick:
		}
		f(now)
	}
}

// expire drops the reservations and leases whose deadlines passed.
func (s *Store) expire(now time.Time) {
	s.lock()
	defer s.unlock()
	for id, r := range s.reservations {
		if now.After(r.deadline) {
			s.dropReservationLocked(id, r, CommitExpired)
		}
	}
	for id, l := range s.leases {
		if now.After(l.expires) {
			s.expireLeaseLocked(id, l)
		}
	}
	if now.Sub(s.lastSweep) >= sweepEvery {
		s.lastSweep = now
		s.sweepIdleLocked(now)
	}
}

// sweepEvery is how often pages idle past their namespace's TTL are
// looked for.
const sweepEvery = time.Second

// Package coord runs a node's part in globally coordinated eviction
// (docs/design.md §5.4): it reports the node's per-tier value summaries
// to the coordinator that asks for them, campaigns for coordinator
// through the registry, and, while elected, merges every live member's
// summaries into cluster-wide cutoffs per tier kind and
// publishes them with an epoch. Every node applies the published cutoffs
// to its store, and falls back to cutoffs computed from its own summaries
// alone when none arrive (no coordinator, etcd unreachable), saying so once
// in its log.
//
// # Start
//
// A node starts on local cutoffs, which is normal until a coordinator
// could have been elected and published: a coordinator that died without
// resigning holds the election until its session lease runs out
// (CandidateTTL), its successor publishes at its next round (on the
// reports of the members that answered it by then), and a
// publication stays in force for StaleRounds rounds (as does the record a
// starting node reads, which may be a dead coordinator's). Within that
// grace (CandidateTTL + StaleRounds·Round from Start) local cutoffs are
// logged once at info; past it a node on local cutoffs warns once, that it
// has received none since it started or that its coordinator's went stale.
// The grace runs from the start, not until a coordinator is first seen: a
// node that never sees one (a watch that cannot read, a coordinator that
// cannot publish) must warn.
//
// # Round
//
// Every Config.Round (default 2s) the loop:
//  1. reads the store's summaries, which it reports when the coordinator
//     asks (Summaries), and re-advertises its metadata (Config.Advertise);
//  2. if this node leads, asks the members due for their summaries
//     (reports.go, at most Config.ReportRate a second, waiting a quarter
//     of a round), merges the latest of every alive member (Compute) and
//     publishes them (registry.PublishCutoffs, refused once the term is
//     over);
//  3. applies the last cutoffs the registry's watch delivered if they are
//     fresh (received within StaleRounds rounds), or the local cutoffs.
//
// # Candidates
//
// Only a few nodes campaign (Config.Candidates, default 3): the first by
// NodeID among the alive members this node sees, decided at Start and
// again each round; a node that leaves the first few stops campaigning
// unless it leads. Each candidate keeps an etcd session alive (a
// keepalive a second), so with every node campaigning three quarters of
// a thousand nodes' etcd requests were election sessions
// (docs/design.md §6.7). Views may differ for a while (at a start every
// node sees itself among the first): there may then be more candidates
// or, while the first few are dead but still held alive, none, and the
// nodes fall back to local cutoffs; the election itself stays etcd's, so
// there is never more than one leader.
//
// Cutoffs from the watch are applied as soon as they arrive. A record of an
// older epoch than one already applied, or of a round already received, is
// ignored. A node that starts (or whose watch reconnects) while no
// coordinator publishes still applies the record it finds for StaleRounds
// rounds: receipt time is all it can judge freshness by, as clocks differ.
package coord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stratakv/strata/eviction"
	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/registry"
)

// Store is the node's page store as coordination uses it.
type Store interface {
	// Summaries returns one summary per tier, in tier order, Turnover
	// filled in.
	Summaries() []eviction.Summary
	// SetCutoffs sets the per-tier admission and eviction floor (worth
	// units); coordinated is false for local fallback cutoffs.
	SetCutoffs(worth []float64, epoch uint64, coordinated bool)
}

// Members is the gossip view: the alive members, this one included, and
// their reports (membership.Membership.Collect), which carry the
// members' encoded summaries (reports.go).
type Members interface {
	Alive() []membership.Member
	Collect(ctx context.Context, ids []string) (map[string][]byte, error)
}

// Config configures Start. Zero means default, but for the required
// NodeID, Registry, Store, Members and Tiers.
type Config struct {
	// NodeID is this node's id. Required.
	NodeID string
	// Registry campaigns, publishes and watches cutoffs. Required.
	Registry *registry.Registry
	// Store gives summaries and takes cutoffs. Required.
	Store Store
	// Members is the gossip view the coordinator merges. Required.
	Members Members
	// Tiers are this node's tier kinds, in the store's tier order.
	// Required (may be empty only for a store without tiers).
	Tiers []string
	// Capacities are this node's tier capacities in bytes, in tier order,
	// for the local fallback cutoffs. Required, as long as Tiers.
	Capacities []int64
	// Advertise, if set, re-gossips this node's metadata (its tier usage)
	// each round (membership.UpdateMetaPaced). Default none.
	Advertise func(context.Context) error
	// ReportRate is how many members' reports a second the coordinator
	// asks for at most (reports.go): every member every round up to
	// ReportRate × Round members. Default DefaultReportRate (100).
	ReportRate float64
	// Round is the time between rounds. Default 2s.
	Round time.Duration
	// StaleRounds is how many rounds published cutoffs stay in force
	// without a newer publication before the node falls back to local
	// cutoffs. Default 3.
	StaleRounds int
	// Headroom is the fraction of every capacity the cutoffs keep free
	// (Compute). Default 0.1; in [0, 1).
	Headroom float64
	// NoFloor keeps the cutoffs out of the store's admission (it gets
	// zeros): summaries, the election and publication still run, for
	// status. Default false: a full node refuses pages worth less than
	// eviction.DefaultAdmitShare of the cutoff, and clients spill them.
	NoFloor bool
	// CandidateTTL is the election session TTL (registry.CandidateConfig).
	// Default registry.DefaultCandidateTTL.
	CandidateTTL time.Duration
	// Candidates is how many nodes campaign for coordinator: the first
	// by NodeID of the alive members (Candidates in the package comment).
	// Default DefaultCandidates (3).
	Candidates int
	// Logger receives the loop's logs. Default: discard.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultRound       = 2 * time.Second
	DefaultStaleRounds = 3
	DefaultHeadroom    = 0.1
	DefaultCandidates  = 3
)

func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.NodeID == "":
		return cfg, fmt.Errorf("coord: NodeID is required: %w", ErrInvalidConfig)
	case cfg.Registry == nil || cfg.Store == nil || cfg.Members == nil:
		return cfg, fmt.Errorf("coord: Registry, Store and Members are required: %w", ErrInvalidConfig)
	case len(cfg.Tiers) != len(cfg.Capacities):
		return cfg, fmt.Errorf("coord: %d tiers, %d capacities: %w", len(cfg.Tiers), len(cfg.Capacities), ErrInvalidConfig)
	case cfg.Round < 0 || cfg.StaleRounds < 0 || cfg.Candidates < 0:
		return cfg, fmt.Errorf("coord: negative Round, StaleRounds or Candidates: %w", ErrInvalidConfig)
	case !(cfg.ReportRate >= 0):
		return cfg, fmt.Errorf("coord: ReportRate %v: want a positive rate: %w", cfg.ReportRate, ErrInvalidConfig)
	case !(cfg.Headroom >= 0 && cfg.Headroom < 1):
		return cfg, fmt.Errorf("coord: Headroom %v outside [0, 1): %w", cfg.Headroom, ErrInvalidConfig)
	}
	cfg.Headroom = cmp.Or(cfg.Headroom, DefaultHeadroom)
	cfg.Round = cmp.Or(cfg.Round, DefaultRound)
	cfg.ReportRate = cmp.Or(cfg.ReportRate, DefaultReportRate)
	cfg.StaleRounds = cmp.Or(cfg.StaleRounds, DefaultStaleRounds)
	cfg.Candidates = cmp.Or(cfg.Candidates, DefaultCandidates)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// ErrInvalidConfig is returned by Start for a Config that breaks a rule.
var ErrInvalidConfig = errors.New("invalid coordination config")

// State is what a node applies now, for status and metrics.
type State struct {
	// Coordinated is false while the node uses local cutoffs.
	Coordinated bool
	// Coordinator is the node that published the applied cutoffs; "" when
	// local.
	Coordinator string
	// Epoch and Round identify the applied publication; 0 when local.
	Epoch, Round uint64
	// Worth is the applied floor per tier of this node, in tier order.
	Worth []float64
	// Leading reports whether this node is the elected coordinator.
	Leading bool
}

// Coord is a node's coordination loop. Close stops it.
type Coord struct {
	cfg Config
	log *slog.Logger

	// candMu guards cand: nil while this node does not campaign. Only the
	// loop (and Start, Close) change it.
	candMu sync.Mutex
	cand   *registry.Candidate

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop

	// mu guards state and sums.
	mu    sync.Mutex
	state State
	sums  []eviction.Summary // the store's, as of the last round
}

// Start campaigns for coordinator and starts the loop. The node uses local
// cutoffs until the first publication arrives.
func Start(cfg Config) (*Coord, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coord{cfg: cfg, log: cfg.Logger.With("component", "coord")}
	if err := c.campaign(); err != nil {
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.setSummaries(cfg.Store.Summaries()) // gossiped from the first round on
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// Close stops the loop and resigns the election (another node takes over
// at once); it is idempotent.
func (c *Coord) Close() error {
	c.cancel()
	c.wg.Wait()
	c.candMu.Lock()
	defer c.candMu.Unlock()
	if c.cand == nil {
		return nil
	}
	return c.cand.Close()
}

// term is the election term this node holds: the zero Term unless it
// campaigns and leads.
func (c *Coord) term() registry.Term {
	c.candMu.Lock()
	defer c.candMu.Unlock()
	if c.cand == nil {
		return registry.Term{}
	}
	return c.cand.Term()
}

// campaign starts or stops campaigning as this node is or is not among
// the first Config.Candidates alive members by NodeID; a candidate that
// leads goes on campaigning.
func (c *Coord) campaign() error {
	first := c.isCandidate()
	c.candMu.Lock()
	defer c.candMu.Unlock()
	switch {
	case first && c.cand == nil:
		cand, err := c.cfg.Registry.Campaign(registry.CandidateConfig{NodeID: c.cfg.NodeID, TTL: c.cfg.CandidateTTL})
		if err != nil {
			return err
		}
		c.cand = cand
		c.log.Debug("campaigning for coordinator")
	case !first && c.cand != nil && !c.cand.Term().Leading():
		err := c.cand.Close()
		c.cand = nil
		c.log.Debug("no longer among the first candidates; stopped campaigning")
		return err
	}
	return nil
}

// isCandidate reports whether this node is among the first
// Config.Candidates alive members by NodeID (Members.Alive is sorted).
func (c *Coord) isCandidate() bool {
	alive := c.cfg.Members.Alive()
	for i, m := range alive {
		if m.NodeID == c.cfg.NodeID {
			return i < c.cfg.Candidates
		}
	}
	return len(alive) < c.cfg.Candidates // not in its own view yet
}

// State returns what the node applies now.
func (c *Coord) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	s.Worth = slices.Clone(s.Worth)
	s.Leading = c.term().Leading()
	return s
}

// Summaries returns the store's summaries as of the last round, for the
// node's report to the coordinator (which memberlist asks for on its
// packet goroutine: this never touches the store).
func (c *Coord) Summaries() []eviction.Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sums
}

func (c *Coord) loop() {
	defer c.wg.Done()
	watch := c.cfg.Registry.WatchCutoffs(c.ctx)
	defer func() {
		for range watch { // drain until the watch goroutine ends
		}
	}()
	t := time.NewTicker(c.cfg.Round)
	defer t.Stop()
	var (
		last    registry.Cutoffs // last publication received
		lastAt  time.Time        // when (zero: none yet)
		ld      leader
		local   = true // applying local cutoffs
		warned  bool   // the fallback was warned of
		started = time.Now()
		told    bool // local cutoffs within the start grace were logged
	)
	c.applyLocal()
	for {
		select {
		case <-c.ctx.Done():
			return
		case rec, ok := <-watch:
			if !ok {
				return
			}
			if rec.Epoch < last.Epoch || (rec.Epoch == last.Epoch && rec.Round <= last.Round) {
				// An older epoch, or a publication seen before (the watch
				// reads the current record again after reconnecting): it
				// says nothing about the coordinator being alive now.
				c.log.Debug("ignoring cutoffs seen before or of an older epoch", "epoch", rec.Epoch, "round", rec.Round,
					"applied_epoch", last.Epoch, "applied_round", last.Round)
				continue
			}
			last, lastAt = rec, time.Now()
			c.apply(rec)
			if local {
				c.log.Info("applying the coordinator's cutoffs", "coordinator", rec.Coordinator, "epoch", rec.Epoch)
			}
			local, warned = false, false
		case <-t.C:
			c.refresh()
			if err := c.campaign(); err != nil {
				c.log.Warn("campaigning for coordinator", "err", err)
			}
			ld.round(c)
			if !lastAt.IsZero() && time.Since(lastAt) <= time.Duration(c.cfg.StaleRounds)*c.cfg.Round {
				continue
			}
			c.applyLocal()
			switch {
			case warned:
			case time.Since(started) <= c.startGrace():
				if !told {
					c.log.Info("using local cutoffs until the coordinator's arrive", "grace", c.startGrace())
					told = true
				}
			case lastAt.IsZero():
				c.log.Warn("no coordinator cutoffs since the start (no coordinator or etcd unreachable); using local cutoffs",
					"waited", time.Since(started).Round(time.Millisecond))
				warned = true
			default:
				c.log.Warn("coordinator cutoffs stale (no coordinator or etcd unreachable); falling back to local cutoffs",
					"coordinator", last.Coordinator, "epoch", last.Epoch, "received", lastAt.Format(time.RFC3339Nano))
				warned = true
			}
			local = true
		}
	}
}

// startGrace is how long after Start local cutoffs are normal (Start in
// the package comment): until a coordinator that died unresigned lost the
// election, and its successor's cutoffs could have arrived.
func (c *Coord) startGrace() time.Duration {
	return cmp.Or(c.cfg.CandidateTTL, registry.DefaultCandidateTTL) + time.Duration(c.cfg.StaleRounds)*c.cfg.Round
}

// Report is the node's summaries as of the last round, encoded for the
// coordinator (EncodeSummaries, fastest tiers first, within
// membership.MaxReportSize): the node's membership.Config.Report.
func (c *Coord) Report() []byte {
	b, _, err := EncodeSummaries(c.Summaries(), membership.MaxReportSize)
	if err != nil {
		c.log.Warn("encoding summaries for the coordinator", "err", err)
		return nil
	}
	return b
}

func (c *Coord) setSummaries(sums []eviction.Summary) {
	c.mu.Lock()
	c.sums = sums
	c.mu.Unlock()
}

// refresh reads the store's summaries (reported when the coordinator asks)
// and re-advertises the node's metadata.
func (c *Coord) refresh() {
	c.setSummaries(c.cfg.Store.Summaries())
	if c.cfg.Advertise != nil && c.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Round/2)
		if err := c.cfg.Advertise(ctx); err != nil {
			c.log.Debug("gossiping summaries", "err", err)
		}
		cancel()
	}
}

// leader is the publishing side of the loop: the term it publishes for and
// its round counter.
type leader struct {
	term    registry.Term
	count   uint64
	failing bool      // the last publication failed (and was logged)
	reports collector // the members' summaries
}

// round publishes one round of cutoffs if this node leads.
func (l *leader) round(c *Coord) {
	err := l.publish(c)
	switch {
	case err == nil:
		l.failing = false
	case c.ctx.Err() != nil:
	case !l.failing:
		c.log.Warn("publishing cutoffs (logged once until it works again)", "epoch", l.term.Epoch, "err", err)
		l.failing = true
	default:
		c.log.Debug("publishing cutoffs", "epoch", l.term.Epoch, "err", err)
	}
}

// publish computes and publishes one round of cutoffs if this node leads.
func (l *leader) publish(c *Coord) error {
	term := c.term()
	if !term.Leading() {
		return nil
	}
	if term != l.term {
		l.term, l.count = term, 0
	}
	perRound := int(c.cfg.ReportRate * c.cfg.Round.Seconds())
	members := l.reports.collect(c.ctx, c.cfg.Members, c.cfg.Members.Alive(), perRound, c.cfg.Round, c.cfg.Round/4)
	tiers, err := Compute(members, c.cfg.Headroom)
	if err != nil {
		return fmt.Errorf("computing cutoffs: %w", err)
	}
	l.count++
	rec := registry.Cutoffs{Round: l.count, Coordinator: c.cfg.NodeID, UnixMs: time.Now().UnixMilli(), Tiers: tiers}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Round)
	defer cancel()
	return c.cfg.Registry.PublishCutoffs(ctx, term, rec)
}

// apply sets the store's cutoffs from a publication; a tier kind the
// publication lacks keeps its local cutoff.
func (c *Coord) apply(rec registry.Cutoffs) {
	worth := c.localWorth()
	for i, kind := range c.cfg.Tiers {
		for _, tc := range rec.Tiers {
			if tc.Kind == kind {
				worth[i] = tc.Worth
			}
		}
	}
	c.cfg.Store.SetCutoffs(c.floor(worth), rec.Epoch, true)
	c.mu.Lock()
	c.state = State{Coordinated: true, Coordinator: rec.Coordinator, Epoch: rec.Epoch, Round: rec.Round, Worth: worth}
	c.mu.Unlock()
}

// floor is what the store gets of cutoffs worth: zeros with NoFloor.
func (c *Coord) floor(worth []float64) []float64 {
	if c.cfg.NoFloor {
		return make([]float64, len(worth))
	}
	return worth
}

// applyLocal sets the store's cutoffs from its own summaries alone.
func (c *Coord) applyLocal() {
	worth := c.localWorth()
	c.cfg.Store.SetCutoffs(c.floor(worth), 0, false)
	c.mu.Lock()
	c.state = State{Worth: worth}
	c.mu.Unlock()
}

// localWorth is, per tier, the floor ComputeCutoffs finds for this node's
// summary and capacity alone.
func (c *Coord) localWorth() []float64 {
	sums := c.Summaries()
	worth := make([]float64, len(c.cfg.Tiers))
	for i := range worth {
		if i >= len(sums) {
			break
		}
		capacity := int64(float64(c.cfg.Capacities[i]) * (1 - c.cfg.Headroom))
		cut, err := eviction.ComputeCutoffs(sums[i:i+1], []int64{capacity})
		if err == nil {
			worth[i] = cut.Floor()
		}
	}
	return worth
}

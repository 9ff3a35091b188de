package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Coordinator election and cutoff publication (docs/design.md §5.4, "Globally
// coordinated").
//
// Every node campaigns (Campaign) under <prefix>/coordinator/ with an etcd
// session of its own (a lease of CandidateConfig.TTL, kept alive by the
// session): the candidate whose key has the lowest create revision leads.
// Its term's Epoch is that create revision, so a later leader always has a
// larger epoch than every earlier one, whoever they were.
//
// The leader publishes cutoffs under <prefix>/cutoffs with a transaction
// that compares its election key's create revision with its epoch: once the
// key is gone (the leader resigned, or its session expired while etcd could
// not hear from it) the comparison fails and the write is refused with
// ErrNotLeader. A new leader is only elected after the old key is deleted,
// and both the deletion and the publications are ordered by etcd, so a
// deposed leader can never overwrite the cutoffs of a newer epoch.
//
// Races: a candidate cut off from etcd may still believe it leads until
// its session's keepalive gives up (about TTL); its publications in that
// window fail the comparison. A candidate whose session expires while it
// waits in Campaign re-campaigns with a new session (and key).

// CandidateConfig configures Campaign.
type CandidateConfig struct {
	// NodeID is the value of the candidate's election key: what
	// Coordinator reports while it leads. Required.
	NodeID string
	// TTL is the session lease: how long after the leader's process dies
	// (or loses etcd) another candidate takes over. Whole seconds, at
	// least 1. Default 3s.
	TTL time.Duration
	// OnChange, if set, is called (from the candidate's goroutine, never
	// concurrently) each time the candidate starts or stops leading, with
	// the term it now holds (zero when not leading). It must not block.
	OnChange func(Term)
}

// DefaultCandidateTTL is CandidateConfig.TTL's default.
const DefaultCandidateTTL = 3 * time.Second

// Term is one leadership of the coordinator election.
type Term struct {
	// Epoch is the create revision of the leader's election key: it
	// increases with every new leader. 0 means "not leading".
	Epoch uint64
	// key is the leader's election key.
	key string
}

// Leading reports whether t is a term (not the zero Term).
func (t Term) Leading() bool { return t.Epoch != 0 }

// Candidate campaigns for coordinator in the background until Close.
type Candidate struct {
	r   *Registry
	cfg CandidateConfig

	ctx    context.Context // cancelled by Close (and by the Registry's Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the campaign goroutine

	mu   sync.Mutex // guards term
	term Term
}

// Campaign starts campaigning for coordinator. The candidate keeps
// campaigning (with a new session after every loss, retrying with backoff
// while etcd is unreachable) until Close, which resigns if it leads.
func (r *Registry) Campaign(cfg CandidateConfig) (*Candidate, error) {
	if err := validName("node id", cfg.NodeID); err != nil {
		return nil, err
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultCandidateTTL
	}
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("registry: candidate TTL %v below 1s: %w", cfg.TTL, ErrInvalid)
	}
	c := &Candidate{r: r, cfg: cfg}
	c.ctx, c.cancel = context.WithCancel(r.ctx)
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// Term is the term the candidate holds now: the zero Term unless it leads.
func (c *Candidate) Term() Term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term
}

// Close stops campaigning, resigns if leading (so another candidate takes
// over at once rather than after TTL) and waits for the campaign goroutine.
// It is idempotent.
func (c *Candidate) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Candidate) setTerm(t Term) {
	c.mu.Lock()
	changed := c.term != t
	c.term = t
	c.mu.Unlock()
	if changed && c.cfg.OnChange != nil {
		c.cfg.OnChange(t)
	}
}

func (c *Candidate) electionPrefix() string { return c.r.cfg.Prefix + "/coordinator" }

// run campaigns until Close: one session per attempt.
func (c *Candidate) run() {
	defer c.wg.Done()
	backoff := regrantMinBackoff
	for c.ctx.Err() == nil {
		if c.campaignOnce() {
			backoff = regrantMinBackoff
			continue
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(backoff + rand.N(backoff/2+1)):
		}
		backoff = min(2*backoff, regrantMaxBackoff)
	}
}

// campaignOnce opens a session, campaigns, leads until the session ends or
// Close, and reports whether it got as far as leading.
func (c *Candidate) campaignOnce() bool {
	ttl := int((c.cfg.TTL + time.Second - 1) / time.Second)
	sess, err := concurrency.NewSession(c.r.cli, concurrency.WithTTL(ttl), concurrency.WithContext(c.ctx))
	if err != nil {
		if c.ctx.Err() == nil {
			c.r.log.Debug("coordinator election: no session", "err", err)
		}
		return false
	}
	defer func() {
		// Revoke the session's lease (deleting our key) unless etcd is
		// gone; then the lease expires by itself.
		ctx, cancel := context.WithTimeout(context.Background(), c.r.cfg.RequestTimeout)
		defer cancel()
		_, _ = c.r.cli.Revoke(ctx, sess.Lease())
		sess.Orphan()
	}()
	// Stop waiting for leadership when the session dies: a key that
	// vanished with it must not make us leader.
	ctx, cancel := context.WithCancel(c.ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-sess.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		<-watched
	}()
	key, rev, err := c.campaign(ctx, sess)
	if err != nil {
		if c.ctx.Err() == nil {
			c.r.log.Debug("coordinator election: campaign ended", "err", err)
		}
		return false
	}
	if ctx.Err() != nil {
		return false
	}
	term := Term{Epoch: uint64(rev), key: key}
	c.r.log.Info("elected coordinator", "node", c.cfg.NodeID, "epoch", term.Epoch)
	c.setTerm(term)
	defer c.setTerm(Term{})
	select {
	case <-sess.Done():
		c.r.log.Warn("coordinator session lost; campaigning again", "node", c.cfg.NodeID, "epoch", term.Epoch)
	case <-c.ctx.Done(): // resign: the deferred revocation deletes the key
	}
	return true
}

// campaign puts this candidate's key (attached to the session's lease) under
// the election prefix and waits until every key created before it is gone:
// then it leads. It returns the key and its create revision (the epoch).
//
// It is concurrency.Election.Campaign less one hazard: that one resigns,
// when its context is cancelled, with a context that never expires, so a
// Close while etcd is down would block until etcd returns.
func (c *Candidate) campaign(ctx context.Context, sess *concurrency.Session) (string, int64, error) {
	pfx := c.electionPrefix() + "/"
	key := fmt.Sprintf("%s%x", pfx, sess.Lease())
	resp, err := c.r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, c.cfg.NodeID, clientv3.WithLease(sess.Lease()))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", 0, err
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	for {
		// The newest key created before ours: wait for it to go.
		prev, err := c.r.cli.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		if err != nil {
			return "", 0, err
		}
		if len(prev.Kvs) == 0 {
			return key, rev, nil
		}
		if err := c.waitDelete(ctx, string(prev.Kvs[0].Key), prev.Header.Revision); err != nil {
			return "", 0, err
		}
	}
}

// waitDelete waits until key is deleted after revision rev.
func (c *Candidate) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.r.cli.Watch(wctx, key, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("registry: watch of %s ended", key)
}

// Coordinator returns the node that leads the coordinator election now and
// its epoch, or ErrNotFound when no candidate campaigns.
func (r *Registry) Coordinator(ctx context.Context) (nodeID string, epoch uint64, err error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.cfg.Prefix+"/coordinator/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, r.fail(ctx, "reading the coordinator", err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, fmt.Errorf("registry: coordinator: %w", ErrNotFound)
	}
	kv := resp.Kvs[0]
	return string(kv.Value), uint64(kv.CreateRevision), nil
}

// Cutoffs is what the coordinator publishes each round: per tier kind, the
// worth floor below which nodes may evict and refuse puts.
type Cutoffs struct {
	// Epoch is the publishing leader's Term.Epoch; PublishCutoffs sets it.
	Epoch uint64 `json:"epoch"`
	// Round counts publications within the epoch, from 1.
	Round uint64 `json:"round"`
	// Coordinator is the publishing node.
	Coordinator string `json:"coordinator"`
	// UnixMs is when the round was computed (the coordinator's clock; for
	// people, not for staleness checks).
	UnixMs int64 `json:"unix_ms"`
	// Tiers are the cutoffs by tier kind, fastest first.
	Tiers []TierCutoff `json:"tiers"`
}

// TierCutoff is the cutoff of one tier kind across the cluster.
type TierCutoff struct {
	Kind string `json:"kind"` // "gpu", "host" or "ssd"
	// Worth is the floor (eviction.Cutoffs.Floor): 0 when the cluster has
	// room for every byte of the tier.
	Worth float64 `json:"worth"`
	// Nodes is how many nodes' summaries went into it.
	Nodes int `json:"nodes"`
	// Pressure is each node's turnover over the cluster mean, by node ID
	// (absent when no node reported turnover).
	Pressure map[string]float64 `json:"pressure,omitempty"`
}

func (r *Registry) cutoffsKey() string { return r.cfg.Prefix + "/cutoffs" }

// PublishCutoffs writes c as the cluster's cutoffs on behalf of term,
// setting c.Epoch. It fails with ErrNotLeader if term is no longer the
// leader's (its election key is gone), so a deposed leader cannot
// overwrite a newer epoch's cutoffs.
func (r *Registry) PublishCutoffs(ctx context.Context, term Term, c Cutoffs) error {
	if !term.Leading() {
		return fmt.Errorf("registry: publishing cutoffs without a term: %w", ErrNotLeader)
	}
	c.Epoch = term.Epoch
	val, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("registry: encoding cutoffs: %w", err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(term.key), "=", int64(term.Epoch))).
		Then(clientv3.OpPut(r.cutoffsKey(), string(val))).
		Commit()
	if err != nil {
		return r.fail(ctx, "publishing cutoffs", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("registry: publishing cutoffs of epoch %d: %w", term.Epoch, ErrNotLeader)
	}
	return nil
}

// CurrentCutoffs reads the last published cutoffs, or ErrNotFound when none
// were ever published.
func (r *Registry) CurrentCutoffs(ctx context.Context) (Cutoffs, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.cutoffsKey())
	if err != nil {
		return Cutoffs{}, r.fail(ctx, "reading cutoffs", err)
	}
	if len(resp.Kvs) == 0 {
		return Cutoffs{}, fmt.Errorf("registry: cutoffs: %w", ErrNotFound)
	}
	var c Cutoffs
	if err := json.Unmarshal(resp.Kvs[0].Value, &c); err != nil {
		return Cutoffs{}, fmt.Errorf("registry: decoding cutoffs: %w", err)
	}
	return c, nil
}

// WatchCutoffs delivers the current cutoffs, if any, then every new
// publication, until ctx ends or the Registry closes; then it closes the
// channel. While etcd is unreachable nothing is delivered (the watch
// resumes when it is back); the receiver tells staleness by time. A record
// that does not decode is logged and skipped.
func (r *Registry) WatchCutoffs(ctx context.Context) <-chan Cutoffs {
	out := make(chan Cutoffs)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	go func() {
		defer close(out)
		defer stop()
		defer cancel()
		backoff := regrantMinBackoff
		for ctx.Err() == nil {
			if r.watchCutoffsOnce(ctx, out) {
				backoff = regrantMinBackoff
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, regrantMaxBackoff)
		}
	}()
	return out
}

// watchCutoffsOnce reads the cutoffs, then watches from that revision until
// the watch fails; it reports whether the read succeeded.
func (r *Registry) watchCutoffsOnce(ctx context.Context, out chan<- Cutoffs) bool {
	gctx, cancel := r.call(ctx)
	resp, err := r.cli.Get(gctx, r.cutoffsKey())
	cancel()
	if err != nil {
		return false
	}
	send := func(val []byte) bool {
		var c Cutoffs
		if err := json.Unmarshal(val, &c); err != nil {
			r.log.Warn("skipping undecodable cutoffs", "err", err)
			return true
		}
		select {
		case out <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if len(resp.Kvs) > 0 && !send(resp.Kvs[0].Value) {
		return true
	}
	wctx := clientv3.WithRequireLeader(ctx)
	for wr := range r.cli.Watch(wctx, r.cutoffsKey(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			if !errors.Is(err, context.Canceled) {
				r.log.Debug("cutoffs watch ended", "err", err)
			}
			return true
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut && !send(ev.Kv.Value) {
				return true
			}
		}
	}
	return true
}

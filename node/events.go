package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/events"
	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
)

// The node's KV event stream (package events; docs/design.md §15): one
// publisher per tenant that opts in (Config.Events.Tenants), fed by the
// store's OnEvent, each on its own sockets and accepting only its tenant's
// PLAIN credentials: the tenant's name as the user, one of its tokens as
// the password (an open node, with no tokens at all, takes any password).
//
// Epochs: the node's incarnation, kept in DataDir/incarnation and raised at
// each start that publishes events, is in every topic. A node that starts
// again first sends, for each opted-in namespace it knows, an
// AllBlocksCleared under its previous incarnation's topic, then, as the
// store recovers the SSD tier, a BlockStored for each page it recovered
// (under the new one; without tokens, which the SSD does not keep).

// EventsConfig turns the KV event stream on.
type EventsConfig struct {
	// Tenants maps each tenant whose namespaces publish events to its
	// sockets. Default none: no stream.
	Tenants map[string]EventsListen
	// Namespaces, when not empty, limits the stream to these namespaces
	// (of the tenants above). Default: every namespace of those tenants.
	Namespaces []namespace.ID
	// Buffer, Queue: events.Config's (batches kept for replay, events
	// waiting to be sent). Defaults: the package's.
	Buffer, Queue int
	// Linger is events.Config.Linger: the longest an event waits while
	// events flow, so that a flow rides a few batches a second (an event
	// after a quiet spell goes at once). Default 10ms; negative: none,
	// each wake sends what is queued; at most MaxEventsLinger.
	Linger time.Duration
}

// MaxEventsLinger bounds EventsConfig.Linger: a router's index should not
// lag the node by more than a fraction of a second.
const MaxEventsLinger = time.Second

// EventsListen is where one tenant's stream is served: TCP addresses,
// host:port, port 0 picking a free one.
type EventsListen struct {
	Pub    string // the PUB socket; required
	Replay string // the ROUTER replay socket; "" none
}

// nodeEvents is the node's part of the stream; its maps are read-only
// after startEvents.
type nodeEvents struct {
	pubs     map[string]*events.Publisher // by tenant
	only     map[namespace.ID]bool        // nil: every namespace
	previous uint64                       // the incarnation before this one; 0 none
	// routes caches where each namespace's events go (namespace.ID ->
	// *nsRoute): its name in the stream (hex) and its tenant's publisher,
	// so that an event, published under the store's lock, neither formats
	// the ID nor looks the tenant up each time; last is the one routed
	// last, which a flow of puts routes again and again (no map lookup,
	// whose hashing and comparing of a 32-byte interface key cost more
	// than the rest of the hook).
	routes sync.Map
	last   atomic.Pointer[nsRoute]
	// tokens is the hashes of the tokens in force, to the tenant (or ""
	// for an admin's): set by loadTenants.
	tokens atomic.Pointer[map[string]string]
}

// startEvents raises the node's incarnation and starts a publisher per
// opted-in tenant; nothing without Config.Events.Tenants.
func (n *Node) startEvents() error {
	cfg := n.cfg.Events
	if len(cfg.Tenants) == 0 {
		return nil
	}
	if cfg.Linger > MaxEventsLinger {
		return fmt.Errorf("events linger %v: at most %v", cfg.Linger, MaxEventsLinger)
	}
	prev, err := raiseIncarnation(n.cfg.DataDir)
	if err != nil {
		return err
	}
	ev := &nodeEvents{pubs: map[string]*events.Publisher{}, previous: prev}
	if len(cfg.Namespaces) > 0 {
		ev.only = map[namespace.ID]bool{}
		for _, id := range cfg.Namespaces {
			ev.only[id] = true
		}
	}
	n.events = ev
	for tenant, l := range cfg.Tenants {
		p, err := events.New(events.Config{Listen: l.Pub, Replay: l.Replay, Node: n.id, Incarnation: prev + 1,
			Auth: ev.auth(tenant), Buffer: cfg.Buffer, Queue: cfg.Queue, Linger: cfg.Linger, Resync: n.resyncEvents, Logger: n.log})
		if err != nil {
			return fmt.Errorf("tenant %s's event stream: %w", tenant, err)
		}
		ev.pubs[tenant] = p
		n.log.Info("KV event stream", "tenant", tenant, "pub", p.Addr(), "replay", p.ReplayAddr(), "incarnation", prev+1)
	}
	return nil
}

// auth accepts tenant's name with one of its tokens, or an admin token.
func (ev *nodeEvents) auth(tenant string) func(user, password string) bool {
	return func(user, password string) bool {
		if user != tenant {
			return false
		}
		tokens := ev.tokens.Load()
		switch {
		case tokens == nil:
			return false // before the first loadTenants
		case len(*tokens) == 0:
			return true // an open node
		}
		who, ok := (*tokens)[server.HashToken(password)]
		return ok && (who == tenant || who == "")
	}
}

// setEventTokens puts the tokens in force for the stream's credentials:
// tenant tokens by hash, and the admins' hashes.
func (n *Node) setEventTokens(tokens map[string]string, admins []string) {
	if n.events == nil {
		return
	}
	m := make(map[string]string, len(tokens)+len(admins)+1)
	for h, t := range tokens {
		m[h] = t
	}
	for _, h := range append(admins, hashOptional(n.cfg.AdminToken)) {
		if h != "" {
			m[h] = ""
		}
	}
	n.events.tokens.Store(&m)
}

// eventHook is the store's OnEvent: nil without a stream.
func (n *Node) eventHook() func(store.Event) {
	if n.events == nil {
		return nil
	}
	return n.events.onStore
}

// onStore turns a store event of an opted-in namespace into the stream's;
// it runs under the store's lock and never blocks (events.Publisher.Publish).
// It allocates nothing: the publisher copies the key and the parent into
// its queue (PublishBlock).
func (ev *nodeEvents) onStore(e store.Event) {
	r := ev.route(e.Namespace, e.Tenant)
	p := r.pub
	if p == nil {
		return
	}
	out := events.Event{Namespace: r.name, BlockSize: e.PageTokens, Tier: e.Tier.String()}
	switch e.Kind {
	case store.EventStored:
		out.Kind = events.Stored
		if e.Info != nil {
			out.Tokens, out.LoraName, out.ExtraKeys = e.Info.Tokens, e.Info.LoraName, e.Info.ExtraKeys
		}
		var parent []byte
		if e.HasParent {
			parent = e.Parent[:]
		}
		p.PublishBlock(out, e.Key[:], parent)
	case store.EventRemoved:
		out.Kind = events.Removed
		p.PublishBlock(out, e.Key[:], nil)
	case store.EventCleared:
		out.Kind = events.Cleared
		p.Publish(out)
	}
}

// nsRoute is where a namespace's events go.
type nsRoute struct {
	id     namespace.ID
	tenant string            // the namespace's tenant as the store named it ("" not known yet)
	name   string            // the namespace as the stream names it
	pub    *events.Publisher // its tenant's, if the namespace is opted in; nil none
}

// route is where the events of namespace id, of tenant, go. A namespace
// recovered from SSD has no tenant until it is registered again: its
// route is made again when the store names one.
func (ev *nodeEvents) route(id namespace.ID, tenant string) *nsRoute {
	if r := ev.last.Load(); r != nil && r.id == id && r.tenant == tenant {
		return r
	}
	v, ok := ev.routes.Load(id)
	r, _ := v.(*nsRoute)
	if !ok || r.tenant != tenant {
		r = &nsRoute{id: id, tenant: tenant, name: id.String()}
		if ev.only == nil || ev.only[id] {
			r.pub = ev.pubs[tenant]
		}
		ev.routes.Store(id, r)
	}
	ev.last.Store(r)
	return r
}

// clearPreviousIncarnation sends, for each opted-in namespace the store
// knows (the registered ones: call it after restoreNamespaces, before
// Recover), an AllBlocksCleared under the previous incarnation's topic.
func (n *Node) clearPreviousIncarnation() {
	ev := n.events
	if ev == nil || ev.previous == 0 {
		return
	}
	for _, ns := range n.store.Admin().Namespaces() {
		if p := ev.pubs[ns.Tenant]; p != nil && (ev.only == nil || ev.only[ns.ID]) {
			p.Publish(events.Event{Namespace: ns.ID.String(), Kind: events.Cleared, Incarnation: ev.previous})
		}
	}
}

// resyncEvents emits a namespace's current pages (events.Config.Resync),
// a page of keys at a time.
func (n *Node) resyncEvents(ns string, emit func(events.Event)) {
	id, err := namespace.ParseID(ns)
	if err != nil {
		return
	}
	var after *namespace.Key
	for {
		infos, next, err := n.store.Admin().ListKeys(id, after, 1024)
		if err != nil {
			return // dropped meanwhile: its AllBlocksCleared went out
		}
		stats, _ := n.store.Admin().NamespaceStats(id)
		for _, in := range infos {
			e := events.Event{Kind: events.Stored, Block: in.Key[:], BlockSize: stats.PageTokens, Tier: in.Tier.String()}
			if in.HasParent {
				e.Parent = in.Parent[:]
			}
			emit(e)
		}
		if next == nil {
			return
		}
		after = next
	}
}

// Snapshot dumps a namespace's pages at a point of its tenant's stream
// (server.Snapshots): the store queues the publisher's mark under its
// lock, the lock the stream's events are published under, and then copies
// the pages as they were there, a shard at a time (store.Admin.Snapshot),
// so the mark's sequence number cuts the stream exactly where the dump
// stands.
func (n *Node) Snapshot(ctx context.Context, ns store.Namespace, send func(server.SnapshotRun) error) error {
	ev := n.events
	if ev == nil || ev.pubs[ns.Tenant] == nil || ev.only != nil && !ev.only[ns.ID] {
		return fmt.Errorf("namespace %s: %w", ns.ID.Short(), server.ErrNoEventStream)
	}
	p := ev.pubs[ns.Tenant]
	var wait func(context.Context) (uint64, error)
	var head *server.SnapshotRun
	start := func(total int) error { // the mark's sequence number, once
		if head != nil {
			return nil
		}
		seq, err := wait(ctx)
		if err != nil {
			return err
		}
		inc := ev.previous + 1
		head = &server.SnapshotRun{Seq: seq, Incarnation: inc, Topic: p.Topic(ns.ID.String(), inc), Total: total}
		return nil
	}
	total := 0
	err := n.store.Admin().Snapshot(ns.ID, func(pages int) error {
		var ok bool
		if wait, ok = p.Mark(); !ok {
			return fmt.Errorf("tenant %s: %w", ns.Tenant, server.ErrEventsBusy)
		}
		total = pages
		return nil
	}, func(run []store.Listed) error {
		if err := start(total); err != nil {
			return err
		}
		r := *head
		r.Keys = run
		return send(r)
	})
	if err != nil {
		return err
	}
	if head == nil { // an empty namespace
		if err := start(total); err != nil {
			return err
		}
		return send(*head)
	}
	return nil
}

// EventsAddrs returns tenant's stream's PUB and replay addresses; "" when
// it has none.
func (n *Node) EventsAddrs(tenant string) (pub, replay string) {
	if n.events == nil || n.events.pubs[tenant] == nil {
		return "", ""
	}
	p := n.events.pubs[tenant]
	return p.Addr(), p.ReplayAddr()
}

// EventsStats returns tenant's stream's counters.
func (n *Node) EventsStats(tenant string) (events.Stats, bool) {
	if n.events == nil || n.events.pubs[tenant] == nil {
		return events.Stats{}, false
	}
	return n.events.pubs[tenant].Stats(), true
}

// eventStreams is the node's streams as its metrics and NodeInfo show them
// (metrics.EventsSource); none without Config.Events.
type eventStreams struct{ ev *nodeEvents }

// EventStreams returns each tenant's stream's addresses and counters, in
// tenant order.
func (s eventStreams) EventStreams() []metrics.EventStream {
	if s.ev == nil {
		return nil
	}
	out := make([]metrics.EventStream, 0, len(s.ev.pubs))
	for tenant, p := range s.ev.pubs {
		st := p.Stats()
		out = append(out, metrics.EventStream{Tenant: tenant, Pub: p.Addr(), Replay: p.ReplayAddr(),
			Incarnation: s.ev.previous + 1, Seq: st.Next, Batches: st.Batches, Events: st.Events, Replays: st.Replays,
			Overruns: st.Overruns, Resyncs: st.Resyncs, SubscriberDrops: st.SubscriberDrops, Refused: st.Refused,
			Subscribers: st.Subscribers, LastEvent: st.LastEvent})
	}
	slices.SortFunc(out, func(a, b metrics.EventStream) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out
}

// closeEvents stops the publishers (after the store: nothing more to send).
func (n *Node) closeEvents() error {
	if n.events == nil {
		return nil
	}
	var errs []error
	for _, p := range n.events.pubs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// raiseIncarnation reads the node's incarnation from dir, writes the next
// one (synced) and returns the one read, 0 when there was none.
func raiseIncarnation(dir string) (uint64, error) {
	path := filepath.Join(dir, "incarnation")
	var prev uint64
	if b, err := os.ReadFile(path); err == nil {
		if prev, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	_, err = fmt.Fprintf(f, "%d\n", prev+1)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return prev, nil
}

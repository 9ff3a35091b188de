// Package metrics exports a node's state and traffic to Prometheus. It is
// the only package that imports the Prometheus client.
//
// Store state (pages, bytes, lookups, outcomes, evictions, leases) is read
// at scrape time from a Source, so it can never drift from what the store
// holds; metrics does not import the store: the node adapts its store to
// Source (see ReadStore). Traffic (RPC latency, transfer bytes, prefill FLOPs saved) is
// counted as it happens by the server through Recorder. The transfer
// rooms' counts are read at scrape time too (ReadRooms); their
// publish-to-loaded time is observed as consumers acknowledge (rooms.go).
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratakv/strata/namespace"
)

// Labels names a namespace in metrics.
type Labels struct {
	Tenant, Model string
	PageTokens    int
}

// Describer returns the labels of a namespace, ok false for namespaces
// whose descriptor is unknown.
type Describer func(namespace.ID) (Labels, bool)

// Registry holds a node's metrics.
type Registry struct {
	reg *prometheus.Registry

	rpcSeconds    *prometheus.HistogramVec
	transferBytes *prometheus.CounterVec
	pageSeconds   *prometheus.HistogramVec
	flopsSaved    *prometheus.CounterVec
	tokensSaved   *prometheus.CounterVec
	flopsBack     *prometheus.CounterVec // retracted: counted by a lookup, then taken back
	tokensBack    *prometheus.CounterVec
	roomSeconds   prometheus.Histogram // publish to ack of transfer attempts (rooms.go)

	// The per-page hot path's series, resolved once: a label lookup
	// (hashing, hex-encoding the namespace) cost about as much as the rest
	// of a raw get's own work.
	transfers sync.Map // transferKey → prometheus.Counter
	saved     sync.Map // savedKey → *savedSeries
	pageIn    prometheus.Observer
	pageOut   prometheus.Observer

	describe Describer
}

type transferKey struct {
	id  namespace.ID
	dir string
}

type savedKey struct {
	id            namespace.ID
	tenant, model string
}

// savedSeries are a namespace's hit-prefix series (Saved, Retracted).
type savedSeries struct {
	tokens, flops, tokensBack, flopsBack prometheus.Counter
}

// savedFor resolves the namespace's hit-prefix series once: a lookup
// counts its hits on every call, and four label lookups cost about an
// eighth of a one-key lookup's node CPU. Resolving makes the retracted
// series exist (at 0), so that saved minus retracted is defined from the
// namespace's first hit on.
func (r *Registry) savedFor(id namespace.ID, l Labels) *savedSeries {
	k := savedKey{id: id, tenant: l.Tenant, model: l.Model}
	if s, ok := r.saved.Load(k); ok {
		return s.(*savedSeries)
	}
	ns := id.Short()
	s, _ := r.saved.LoadOrStore(k, &savedSeries{
		tokens:     r.tokensSaved.WithLabelValues(ns, l.Tenant, l.Model),
		flops:      r.flopsSaved.WithLabelValues(ns, l.Tenant, l.Model),
		tokensBack: r.tokensBack.WithLabelValues(ns, l.Tenant, l.Model),
		flopsBack:  r.flopsBack.WithLabelValues(ns, l.Tenant, l.Model),
	})
	return s.(*savedSeries)
}

// New builds a registry. It exports traffic and process metrics; store
// state joins once ReadStore names its source.
func New(describe Describer) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), describe: describe}
	r.rpcSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "strata_rpc_duration_seconds", Help: "gRPC call latency by method and status code.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14)}, []string{"method", "code"})
	r.transferBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_transfer_bytes_total", Help: "Page bytes received (in) and sent (out)."},
		[]string{"namespace", "direction"})
	r.pageSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "strata_page_transfer_seconds", Help: "Time to send or receive one page's bytes.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 14)}, []string{"direction"})
	r.flopsSaved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_prefill_flops_saved_total", Help: "Prefill FLOPs engines avoid by loading hit prefixes (from the namespace's compute profile)."},
		[]string{"namespace", "tenant", "model"})
	r.tokensSaved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hit_prefix_tokens_total", Help: "Tokens inside hit prefixes returned by lookups."},
		[]string{"namespace", "tenant", "model"})
	r.flopsBack = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_prefill_flops_retracted_total", Help: "Prefill FLOPs counted in strata_prefill_flops_saved_total and then taken back: " +
			"pages of this node's part of a cluster lookup that lay past a page missing on another node. Net saving: saved minus retracted."},
		[]string{"namespace", "tenant", "model"})
	r.tokensBack = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_hit_prefix_tokens_retracted_total", Help: "Tokens counted in strata_hit_prefix_tokens_total and then taken back " +
			"(as strata_prefill_flops_retracted_total)."},
		[]string{"namespace", "tenant", "model"})
	r.pageIn, r.pageOut = r.pageSeconds.WithLabelValues("in"), r.pageSeconds.WithLabelValues("out")
	r.roomSeconds = newRoomSeconds()
	r.reg.MustRegister(r.rpcSeconds, r.transferBytes, r.pageSeconds, r.flopsSaved, r.tokensSaved, r.flopsBack, r.tokensBack, r.roomSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// ReadStore makes scrapes export src's state, labelling namespaces through
// the registry's Describer. Call it once, before serving Handler.
func (r *Registry) ReadStore(src Source) {
	r.reg.MustRegister(&storeCollector{src: src, describe: r.describe})
}

// Handler serves the metrics in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// RPC records one finished call.
func (r *Registry) RPC(method, code string, d time.Duration) {
	r.rpcSeconds.WithLabelValues(method, code).Observe(d.Seconds())
}

// Transfer records page bytes moved: direction is "in" (puts) or "out"
// (gets).
func (r *Registry) Transfer(id namespace.ID, direction string, bytes int) {
	k := transferKey{id: id, dir: direction}
	c, ok := r.transfers.Load(k)
	if !ok {
		c, _ = r.transfers.LoadOrStore(k, r.transferBytes.WithLabelValues(id.Short(), direction))
	}
	c.(prometheus.Counter).Add(float64(bytes))
}

// PageTime records how long one whole page took to send or receive.
func (r *Registry) PageTime(direction string, d time.Duration) {
	switch direction {
	case "in":
		r.pageIn.Observe(d.Seconds())
	case "out":
		r.pageOut.Observe(d.Seconds())
	default:
		r.pageSeconds.WithLabelValues(direction).Observe(d.Seconds())
	}
}

// Saved records a lookup's hit prefix: its tokens and the prefill FLOPs
// they save. It also makes the namespace's retracted series exist (at 0),
// so that saved minus retracted is defined from its first hit on.
func (r *Registry) Saved(id namespace.ID, l Labels, tokens int, flops float64) {
	ss := r.savedFor(id, l)
	ss.tokens.Add(float64(tokens))
	if flops > 0 {
		ss.flops.Add(flops)
	}
}

// Retracted counts hits a lookup counted (Saved) that were not part of the
// engine's hit prefix after all: pages of this node past a page missing on
// another node, which the client reported (Strata.Orphans).
func (r *Registry) Retracted(id namespace.ID, l Labels, tokens int, flops float64) {
	ss := r.savedFor(id, l)
	ss.tokensBack.Add(float64(tokens))
	ss.flopsBack.Add(flops)
}

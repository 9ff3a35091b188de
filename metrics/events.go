package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The KV event stream's health (docs/design.md §15): each tenant's stream's
// counters, read at scrape time from an EventsSource as the store's are
// from a Source.

// EventsSource gives the node's KV event streams at scrape time. The node
// adapts its publishers to it; metrics knows nothing of their types.
type EventsSource interface {
	EventStreams() []EventStream
}

// EventStream is one tenant's stream: counts since the node started, and
// the gauges of now.
type EventStream struct {
	Tenant string
	// Pub and Replay are the stream's socket addresses ("" no replay).
	Pub, Replay string
	// Incarnation is the node's incarnation in the stream's topics.
	Incarnation uint64
	// Seq is the sequence number the next batch will carry.
	Seq     uint64
	Batches uint64 // batches sent (one sequence number each)
	Events  uint64 // events sent
	// Replays counts requests the replay socket served.
	Replays uint64
	// Overruns counts events dropped at the full queue (each resyncs its
	// namespace); Resyncs the namespaces resynchronised.
	Overruns, Resyncs uint64
	// SubscriberDrops counts batches slow subscribers missed.
	SubscriberDrops uint64
	// Refused counts connections refused (credentials, handshake, too many).
	Refused     uint64
	Subscribers int
	// LastEvent is when the last batch was sent; zero before the first.
	LastEvent time.Time
}

var (
	descEventsSent = prometheus.NewDesc("strata_kv_events_sent_total",
		"KV events the tenant's stream sent (BlockStored, BlockRemoved, AllBlocksCleared).", []string{"tenant"}, nil)
	descEventBatches = prometheus.NewDesc("strata_kv_event_batches_total",
		"KV event batches the tenant's stream sent, one sequence number each.", []string{"tenant"}, nil)
	descEventReplays = prometheus.NewDesc("strata_kv_event_replay_requests_total",
		"Requests the tenant's replay socket served.", []string{"tenant"}, nil)
	descEventOverruns = prometheus.NewDesc("strata_kv_event_overruns_total",
		"KV events dropped at the stream's full queue; each resynchronises its namespace (AllBlocksCleared, then its pages).",
		[]string{"tenant"}, nil)
	descEventResyncs = prometheus.NewDesc("strata_kv_event_resyncs_total",
		"Namespaces the tenant's stream resynchronised after an overrun.", []string{"tenant"}, nil)
	descEventSubDrops = prometheus.NewDesc("strata_kv_event_subscriber_drops_total",
		"Batches slow subscribers of the tenant's stream missed (they ask the replay socket).", []string{"tenant"}, nil)
	descEventRefused = prometheus.NewDesc("strata_kv_event_connections_refused_total",
		"Connections the tenant's stream refused: credentials, handshake, too many.", []string{"tenant"}, nil)
	descEventSubs = prometheus.NewDesc("strata_kv_event_subscribers",
		"Subscribers connected to the tenant's stream now.", []string{"tenant"}, nil)
	descEventAge = prometheus.NewDesc("strata_kv_event_last_age_seconds",
		"Seconds since the tenant's stream sent its last batch; absent before the first.", []string{"tenant"}, nil)
)

// ReadEvents makes scrapes export src's event streams. Call it once,
// before serving Handler.
func (r *Registry) ReadEvents(src EventsSource) {
	r.reg.MustRegister(eventsCollector{src})
}

// eventsCollector reads an EventsSource at scrape time.
type eventsCollector struct{ src EventsSource }

func (c eventsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEventsSent, descEventBatches, descEventReplays, descEventOverruns,
		descEventResyncs, descEventSubDrops, descEventRefused, descEventSubs, descEventAge} {
		ch <- d
	}
}

func (c eventsCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, s := range c.src.EventStreams() {
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), s.Tenant)
		}
		counter(descEventsSent, s.Events)
		counter(descEventBatches, s.Batches)
		counter(descEventReplays, s.Replays)
		counter(descEventOverruns, s.Overruns)
		counter(descEventResyncs, s.Resyncs)
		counter(descEventSubDrops, s.SubscriberDrops)
		counter(descEventRefused, s.Refused)
		ch <- prometheus.MustNewConstMetric(descEventSubs, prometheus.GaugeValue, float64(s.Subscribers), s.Tenant)
		if !s.LastEvent.IsZero() {
			ch <- prometheus.MustNewConstMetric(descEventAge, prometheus.GaugeValue, now.Sub(s.LastEvent).Seconds(), s.Tenant)
		}
	}
}

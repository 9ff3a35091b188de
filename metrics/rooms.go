package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The transfer rooms' metrics (docs/design.md §14): their counts are read
// at scrape time from a RoomsSource, as the store's are from a Source;
// the publish-to-loaded latency is observed as acknowledgements happen
// (Registry.RoomLoaded).

// RoomsSource gives the state of a node's transfer rooms at scrape time.
// The node adapts its rooms to it; metrics knows nothing of their types.
type RoomsSource interface {
	RoomStats() Rooms
}

// Rooms is what one scrape exports of the transfer rooms: counts since
// the node started, and the gauges of now.
type Rooms struct {
	Live       int // rooms whose attempt is not over
	Tombstones int // ended attempts' records kept
	Waiting    int // consumers waiting for a publish
	// PinnedBytes is the bytes the live attempts pin for their consumers.
	PinnedBytes       uint64
	Opened, Published uint64
	Acked             uint64
	AckedBytes        uint64 // bytes of the acknowledged attempts
	Expired           uint64
	// Aborted counts aborts by reason (user_cancel, timeout,
	// producer_failure, consumer_failure). Every reason should be present,
	// at 0 before its first abort.
	Aborted           map[string]uint64
	Mismatches        uint64 // consumers refused for their namespace (also aborted, consumer_failure)
	Busy              uint64 // opens refused: the room's attempt is live
	Stale             uint64 // calls naming an attempt not the room's current one
	TombstonesDropped uint64 // records forgotten, past their TTL or over the cap
}

// reasonNone is the reason label of outcomes that are not aborts.
const reasonNone = "none"

var (
	descRoomsOpened = prometheus.NewDesc("strata_room_attempts_opened_total",
		"Transfer attempts producers opened on this node (the room's owner).", nil, nil)
	descRoomsPublished = prometheus.NewDesc("strata_room_attempts_published_total",
		"Transfer attempts whose producer published its pages, pinning them for the consumer.", nil, nil)
	descRoomOutcomes = prometheus.NewDesc("strata_room_outcomes_total",
		"Transfer attempts ended, by outcome: acked (the consumer loaded the pages), aborted (by reason: user_cancel, timeout, "+
			"producer_failure, consumer_failure; a consumer refused for its namespace is consumer_failure) or expired (never "+
			"published within the open TTL, or not acknowledged within the pin's TTL); reason is none but for aborts. An attempt "+
			"aborted while its consumer reads is counted aborted, and expired too if that consumer never acknowledges.",
		[]string{"outcome", "reason"}, nil)
	descRoomRefusals = prometheus.NewDesc("strata_room_refusals_total",
		"Room calls refused, by reason: busy (an open while the room's attempt is live), stale (a call naming an attempt that "+
			"is not the room's current one: late or duplicate), mismatch (a consumer whose namespace differs from the producer's).",
		[]string{"reason"}, nil)
	descRoomAckedBytes = prometheus.NewDesc("strata_room_acked_bytes_total",
		"Bytes of the transfer attempts consumers acknowledged as loaded; its rate is the prefill-decode transfer's bytes per second.", nil, nil)
	descRoomPinned = prometheus.NewDesc("strata_room_pinned_bytes",
		"Bytes the live transfer attempts of this node's rooms pin for their consumers (on this node and the pages' owners).", nil, nil)
	descRoomsLive = prometheus.NewDesc("strata_rooms_live",
		"Transfer rooms whose attempt is not over (open, published, loading or draining).", nil, nil)
	descRoomTombs = prometheus.NewDesc("strata_room_tombstones",
		"Records of ended transfer attempts kept (bounded in time and count), so that late calls are answered as stale.", nil, nil)
	descRoomTombsDropped = prometheus.NewDesc("strata_room_tombstones_dropped_total",
		"Records of ended transfer attempts forgotten, past their TTL or over the cap.", nil, nil)
	descRoomWaiting = prometheus.NewDesc("strata_room_waiting_consumers",
		"Consumers waiting in Await for a room's producer to publish.", nil, nil)
)

// newRoomSeconds is the publish-to-loaded histogram: from 250 µs up to
// about four minutes, past the default pin TTL.
func newRoomSeconds() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_room_publish_to_ack_seconds",
		Help:    "Time from a transfer attempt's publish to its consumer's acknowledgement that it loaded the pages.",
		Buckets: prometheus.ExponentialBuckets(250e-6, 2.5, 16)})
}

// ReadRooms makes scrapes export src's transfer rooms. Call it once,
// before serving Handler.
func (r *Registry) ReadRooms(src RoomsSource) {
	r.reg.MustRegister(roomsCollector{src})
}

// RoomLoaded records the time from an attempt's publish to its consumer's
// acknowledgement.
func (r *Registry) RoomLoaded(d time.Duration) {
	r.roomSeconds.Observe(d.Seconds())
}

// roomsCollector reads a RoomsSource at scrape time.
type roomsCollector struct{ src RoomsSource }

func (c roomsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRoomsOpened, descRoomsPublished, descRoomOutcomes, descRoomRefusals,
		descRoomAckedBytes, descRoomPinned, descRoomsLive, descRoomTombs, descRoomTombsDropped, descRoomWaiting} {
		ch <- d
	}
}

func (c roomsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.RoomStats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(descRoomsOpened, s.Opened)
	counter(descRoomsPublished, s.Published)
	counter(descRoomOutcomes, s.Acked, "acked", reasonNone)
	counter(descRoomOutcomes, s.Expired, "expired", reasonNone)
	for reason, n := range s.Aborted {
		counter(descRoomOutcomes, n, "aborted", reason)
	}
	counter(descRoomRefusals, s.Busy, "busy")
	counter(descRoomRefusals, s.Stale, "stale")
	counter(descRoomRefusals, s.Mismatches, "mismatch")
	counter(descRoomAckedBytes, s.AckedBytes)
	counter(descRoomTombsDropped, s.TombstonesDropped)
	gauge(descRoomPinned, s.PinnedBytes)
	gauge(descRoomsLive, uint64(s.Live))
	gauge(descRoomTombs, uint64(s.Tombstones))
	gauge(descRoomWaiting, uint64(s.Waiting))
}

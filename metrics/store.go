package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratakv/strata/store"
)

// storeCollector reads the store at scrape time.
type storeCollector struct {
	st       *store.Store
	describe Describer
}

var (
	nsLabels      = []string{"namespace", "tenant", "model"}
	descPages     = prometheus.NewDesc("strata_pages", "Published pages by namespace and tier.", append(nsLabels, "tier"), nil)
	descBytes     = prometheus.NewDesc("strata_bytes", "Bytes of published pages by namespace and tier.", append(nsLabels, "tier"), nil)
	descLookups   = prometheus.NewDesc("strata_lookups_total", "Lookup calls.", nsLabels, nil)
	descKeys      = prometheus.NewDesc("strata_lookup_keys_total", "Keys asked for by lookups.", nsLabels, nil)
	descHits      = prometheus.NewDesc("strata_hit_keys_total", "Keys inside returned hit prefixes.", nsLabels, nil)
	descMisses    = prometheus.NewDesc("strata_miss_keys_total", "Looked-up keys outside the hit prefix.", nsLabels, nil)
	descPuts      = prometheus.NewDesc("strata_puts_total", "Pages whose put finished, by outcome.", append(nsLabels, "outcome"), nil)
	descEvictions = prometheus.NewDesc("strata_evictions_total", "Pages removed, by reason.", append(nsLabels, "reason"), nil)
	descDemotions = prometheus.NewDesc("strata_demotions_total", "Pages moved one tier down.", nsLabels, nil)
	descLeases    = prometheus.NewDesc("strata_leases_active", "Read leases held.", nsLabels, nil)
	descExpired   = prometheus.NewDesc("strata_leases_expired_total", "Read leases that ran out before release.", nsLabels, nil)
	descCapacity  = prometheus.NewDesc("strata_tier_capacity_bytes", "Tier capacity.", []string{"tier"}, nil)
	descUsed      = prometheus.NewDesc("strata_tier_used_bytes", "Tier bytes in use (pages and reservations, with size-class rounding).", []string{"tier"}, nil)
	descReserved  = prometheus.NewDesc("strata_reservations", "Open reservations.", nil, nil)
	descCutoff    = prometheus.NewDesc("strata_eviction_cutoff_worth", "Admission floor per tier in worth units (reuse x recompute FLOPs per byte); 0 = none.", []string{"tier"}, nil)
	descCoord     = prometheus.NewDesc("strata_eviction_coordinated", "1 while the node applies the cluster coordinator's cutoffs, 0 on local ones.", nil, nil)
	descEpoch     = prometheus.NewDesc("strata_eviction_cutoff_epoch", "Epoch of the coordinator whose cutoffs the node applies (0: local).", nil, nil)
	descHintsLost = prometheus.NewDesc("strata_eviction_hints_dropped_total", "Child and value hints dropped because too many were pending (hints are advisory).", nil, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPages, descBytes, descLookups, descKeys, descHits, descMisses,
		descPuts, descEvictions, descDemotions, descLeases, descExpired, descCapacity, descUsed, descReserved,
		descCutoff, descCoord, descEpoch, descHintsLost} {
		ch <- d
	}
}

// outcomes names put outcomes as metric label values.
var outcomes = map[store.CommitStatus]string{
	store.CommitCommitted: "committed", store.CommitExists: "exists",
	store.CommitChecksumMismatch: "checksum_mismatch", store.CommitSizeMismatch: "size_mismatch",
	store.CommitIncomplete: "incomplete", store.CommitUnknownWrite: "unknown_write",
	store.CommitExpired: "expired", store.CommitAborted: "aborted", store.CommitFailed: "failed",
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	kinds := c.st.TierKinds()
	for _, ns := range c.st.Namespaces() {
		l, _ := c.describe(ns.ID)
		lv := []string{ns.ID.Short(), l.Tenant, l.Model}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv[:3:3], extra...)...)
		}
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(lv[:3:3], extra...)...)
		}
		for i, pages := range ns.TierPages {
			gauge(descPages, float64(pages), kinds[i].String())
			gauge(descBytes, float64(pages*ns.PageBytes), kinds[i].String())
		}
		counter(descLookups, float64(ns.Lookups))
		counter(descKeys, float64(ns.LookupKeys))
		counter(descHits, float64(ns.HitKeys))
		counter(descMisses, float64(ns.LookupKeys-ns.HitKeys))
		for st, name := range outcomes {
			counter(descPuts, float64(ns.Puts[st]), name)
		}
		counter(descPuts, float64(ns.Rejected), "rejected")
		counter(descEvictions, float64(ns.Evicted), "capacity")
		counter(descEvictions, float64(ns.Corrupt), "corrupt")
		counter(descEvictions, float64(ns.Deleted), "deleted")
		counter(descEvictions, float64(ns.Expired), "ttl")
		counter(descEvictions, float64(ns.Orphaned), "orphan")
		counter(descDemotions, float64(ns.Demoted))
		gauge(descLeases, float64(ns.Leases))
		counter(descExpired, float64(ns.LeasesExpired))
	}
	st := c.st.Stats()
	for _, t := range st.Tiers {
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(t.Capacity), t.Kind.String())
		ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, float64(t.Used), t.Kind.String())
	}
	ch <- prometheus.MustNewConstMetric(descReserved, prometheus.GaugeValue, float64(st.Reservations))
	worth, epoch, coordinated := c.st.CutoffState()
	for i, w := range worth {
		ch <- prometheus.MustNewConstMetric(descCutoff, prometheus.GaugeValue, w, kinds[i].String())
	}
	co := 0.0
	if coordinated {
		co = 1
	}
	ch <- prometheus.MustNewConstMetric(descCoord, prometheus.GaugeValue, co)
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(epoch))
	ch <- prometheus.MustNewConstMetric(descHintsLost, prometheus.CounterValue, float64(c.st.HintsDropped()))
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratakv/strata/namespace"
)

// Source gives the store's state at scrape time. The node adapts its store
// to it; metrics knows nothing of the store's types.
type Source interface {
	Snapshot() Snapshot
}

// Snapshot is the store state one scrape exports.
type Snapshot struct {
	Tiers        []Tier // in tier order
	Namespaces   []Namespace
	Reservations int // open reservations for known pages, slots not included
	// Slots is the shm slots granted ahead of puts: reservations no page
	// is bound to yet (Tier.SlotBytes holds their bytes).
	Slots int
	// Cutoffs is the admission floor per tier (indexed like Tiers, possibly
	// shorter) in worth units; 0 means none.
	Cutoffs      []float64
	CutoffEpoch  uint64 // epoch of the coordinator whose cutoffs apply (0: local)
	Coordinated  bool   // the cutoffs are the cluster coordinator's
	HintsDropped uint64 // child and value hints dropped (too many pending)
	// LookupsShed counts lookups that shed their bookkeeping (history
	// counts, hits) under contention or past its CPU budget;
	// LookupsShedOverBudget those of them that shed it past the budget.
	LookupsShed           uint64
	LookupsShedOverBudget uint64
	Tenants               []TenantUsage
}

// TenantUsage is what one tenant holds on the node, against its quota.
type TenantUsage struct {
	Tenant       string
	Bytes        int64 // published pages, over every tier
	ReserveBytes int64 // open reservations, slots not included
	Reservations int
	// SlotBytes and Slots are its shm slots granted ahead of puts; its
	// reservation quotas count them with its reservations.
	SlotBytes int64
	Slots     int
	Leases    int
}

// Tier is one tier's size.
type Tier struct {
	Name     string // the tier label: "host", "ssd", ...
	Capacity int64  // bytes the tier may hand out
	Used     int64  // bytes in use, with size-class rounding
	// SlotBytes is the part of Used the shm slots granted ahead of puts
	// hold (no page yet).
	SlotBytes int64
	// Fault is the tier's disk trouble ("disk-full", "read-only",
	// "io-error"); "" or "ok" when none.
	Fault string
}

// Namespace is one namespace's counters.
type Namespace struct {
	ID         namespace.ID
	PageBytes  int64
	TierPages  []int64 // published pages per tier, indexed like Snapshot.Tiers
	Lookups    uint64
	LookupKeys uint64
	HitKeys    uint64 // keys inside returned hit prefixes
	// Puts counts pages whose put finished, by outcome. Every outcome the
	// store has should be present (at 0 before its first occurrence).
	Puts          map[PutOutcome]uint64
	Rejected      uint64 // pages the reservation refused
	Evicted       uint64 // dropped to make room
	Corrupt       uint64 // dropped failing to read or verify
	Deleted       uint64 // removed by Delete
	Handed        uint64 // given to their owner (hinted handoff)
	Expired       uint64 // removed idle past the TTL
	Orphaned      uint64 // dropped as orphans
	Demoted       uint64 // moved one tier down
	Leases        int64  // read leases held
	LeasesExpired uint64 // leases that ran out before release
}

// PutOutcome is the "outcome" label of strata_puts_total.
type PutOutcome string

// Put outcomes, as label values.
const (
	PutCommitted        PutOutcome = "committed"
	PutExists           PutOutcome = "exists"
	PutChecksumMismatch PutOutcome = "checksum_mismatch"
	PutSizeMismatch     PutOutcome = "size_mismatch"
	PutIncomplete       PutOutcome = "incomplete"
	PutUnknownWrite     PutOutcome = "unknown_write"
	PutExpired          PutOutcome = "expired"
	PutAborted          PutOutcome = "aborted"
	PutFailed           PutOutcome = "failed"
	// PutRejected is exported from Namespace.Rejected, not from Puts.
	PutRejected PutOutcome = "rejected"
)

// storeCollector reads a Source at scrape time.
type storeCollector struct {
	src      Source
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
	descFault     = prometheus.NewDesc("strata_tier_fault", "1 for the tier's current fault: ok, disk-full, read-only or io-error.", []string{"tier", "fault"}, nil)
	descSlotUsed  = prometheus.NewDesc("strata_tier_slot_bytes", "Tier bytes that shm slots granted ahead of puts hold (part of strata_tier_used_bytes: set aside, no page yet).", []string{"tier"}, nil)
	descReserved  = prometheus.NewDesc("strata_reservations", "Open reservations for known pages (puts in flight); slots granted ahead are strata_slots.", nil, nil)
	descSlots     = prometheus.NewDesc("strata_slots", "Shm slots granted ahead of puts: arena space shm connections hold for pages not yet put (reservations to the quotas, apart from strata_reservations).", nil, nil)
	descCutoff    = prometheus.NewDesc("strata_eviction_cutoff_worth", "Admission floor per tier in worth units (reuse x recompute FLOPs per byte); 0 = none.", []string{"tier"}, nil)
	descCoord     = prometheus.NewDesc("strata_eviction_coordinated", "1 while the node applies the cluster coordinator's cutoffs, 0 on local ones.", nil, nil)
	descEpoch     = prometheus.NewDesc("strata_eviction_cutoff_epoch", "Epoch of the coordinator whose cutoffs the node applies (0: local).", nil, nil)
	descHintsLost = prometheus.NewDesc("strata_eviction_hints_dropped_total", "Child and value hints dropped because too many were pending (hints are advisory).", nil, nil)
	descShed      = prometheus.NewDesc("strata_lookups_shed_total", "Lookups whose bookkeeping (the eviction histories' counts, the pages' hits) was shed, by reason: contention (another lookup's was under way) or budget (the bookkeeping had spent its share of the node's CPU, --lookup-bookkeeping). Under load the policy samples lookups instead of counting each. Their answers are exact.", []string{"reason"}, nil)

	tenantLabel        = []string{"tenant"}
	descTenantBytes    = prometheus.NewDesc("strata_tenant_bytes", "Bytes of the tenant's published pages on this node, over every tier (its byte quota counts these and its open reservations).", tenantLabel, nil)
	descTenantReserved = prometheus.NewDesc("strata_tenant_reserved_bytes", "Bytes of the tenant's open reservations, its slots not included (its quotas count both).", tenantLabel, nil)
	descTenantRes      = prometheus.NewDesc("strata_tenant_reservations", "The tenant's open reservations, its slots not included (its quotas count both).", tenantLabel, nil)
	descTenantSlotB    = prometheus.NewDesc("strata_tenant_slot_bytes", "Bytes of the tenant's shm slots granted ahead of puts.", tenantLabel, nil)
	descTenantSlots    = prometheus.NewDesc("strata_tenant_slots", "The tenant's shm slots granted ahead of puts.", tenantLabel, nil)
	descTenantLeases   = prometheus.NewDesc("strata_tenant_leases", "The tenant's active read leases.", tenantLabel, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPages, descBytes, descLookups, descKeys, descHits, descMisses,
		descPuts, descEvictions, descDemotions, descLeases, descExpired, descCapacity, descUsed, descSlotUsed, descFault,
		descReserved, descSlots, descCutoff, descCoord, descEpoch, descHintsLost, descShed, descTenantBytes,
		descTenantReserved, descTenantRes, descTenantSlotB, descTenantSlots, descTenantLeases} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src.Snapshot()
	for _, ns := range snap.Namespaces {
		l, _ := c.describe(ns.ID)
		lv := []string{ns.ID.Short(), l.Tenant, l.Model}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv[:3:3], extra...)...)
		}
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(lv[:3:3], extra...)...)
		}
		for i, pages := range ns.TierPages {
			gauge(descPages, float64(pages), snap.Tiers[i].Name)
			gauge(descBytes, float64(pages*ns.PageBytes), snap.Tiers[i].Name)
		}
		counter(descLookups, float64(ns.Lookups))
		counter(descKeys, float64(ns.LookupKeys))
		counter(descHits, float64(ns.HitKeys))
		counter(descMisses, float64(ns.LookupKeys-ns.HitKeys))
		for outcome, n := range ns.Puts {
			counter(descPuts, float64(n), string(outcome))
		}
		counter(descPuts, float64(ns.Rejected), string(PutRejected))
		counter(descEvictions, float64(ns.Evicted), "capacity")
		counter(descEvictions, float64(ns.Corrupt), "corrupt")
		counter(descEvictions, float64(ns.Deleted), "deleted")
		counter(descEvictions, float64(ns.Handed), "handoff")
		counter(descEvictions, float64(ns.Expired), "ttl")
		counter(descEvictions, float64(ns.Orphaned), "orphan")
		counter(descDemotions, float64(ns.Demoted))
		gauge(descLeases, float64(ns.Leases))
		counter(descExpired, float64(ns.LeasesExpired))
	}
	for _, t := range snap.Tiers {
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(t.Capacity), t.Name)
		ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, float64(t.Used), t.Name)
		ch <- prometheus.MustNewConstMetric(descSlotUsed, prometheus.GaugeValue, float64(t.SlotBytes), t.Name)
		fault := t.Fault
		if fault == "" {
			fault = "ok"
		}
		ch <- prometheus.MustNewConstMetric(descFault, prometheus.GaugeValue, 1, t.Name, fault)
	}
	ch <- prometheus.MustNewConstMetric(descReserved, prometheus.GaugeValue, float64(snap.Reservations))
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(snap.Slots))
	for i, w := range snap.Cutoffs {
		ch <- prometheus.MustNewConstMetric(descCutoff, prometheus.GaugeValue, w, snap.Tiers[i].Name)
	}
	co := 0.0
	if snap.Coordinated {
		co = 1
	}
	ch <- prometheus.MustNewConstMetric(descCoord, prometheus.GaugeValue, co)
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(snap.CutoffEpoch))
	ch <- prometheus.MustNewConstMetric(descHintsLost, prometheus.CounterValue, float64(snap.HintsDropped))
	ch <- prometheus.MustNewConstMetric(descShed, prometheus.CounterValue, float64(snap.LookupsShed-snap.LookupsShedOverBudget), "contention")
	ch <- prometheus.MustNewConstMetric(descShed, prometheus.CounterValue, float64(snap.LookupsShedOverBudget), "budget")
	for _, u := range snap.Tenants {
		ch <- prometheus.MustNewConstMetric(descTenantBytes, prometheus.GaugeValue, float64(u.Bytes), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantReserved, prometheus.GaugeValue, float64(u.ReserveBytes), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantRes, prometheus.GaugeValue, float64(u.Reservations), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantSlotB, prometheus.GaugeValue, float64(u.SlotBytes), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantSlots, prometheus.GaugeValue, float64(u.Slots), u.Tenant)
		ch <- prometheus.MustNewConstMetric(descTenantLeases, prometheus.GaugeValue, float64(u.Leases), u.Tenant)
	}
}

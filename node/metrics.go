package node

import (
	"slices"
	"strings"

	"github.com/stratakv/strata/metrics"
	"github.com/stratakv/strata/store"
)

// storeMetrics adapts the store to metrics.Source: metrics declares what a
// scrape reads and does not import the store.
type storeMetrics struct{ st *store.Store }

// putOutcomes names each commit status as a metrics put outcome.
var putOutcomes = map[store.CommitStatus]metrics.PutOutcome{
	store.CommitCommitted: metrics.PutCommitted, store.CommitExists: metrics.PutExists,
	store.CommitChecksumMismatch: metrics.PutChecksumMismatch, store.CommitSizeMismatch: metrics.PutSizeMismatch,
	store.CommitIncomplete: metrics.PutIncomplete, store.CommitUnknownWrite: metrics.PutUnknownWrite,
	store.CommitExpired: metrics.PutExpired, store.CommitAborted: metrics.PutAborted, store.CommitFailed: metrics.PutFailed,
}

func (m storeMetrics) Snapshot() metrics.Snapshot {
	st, open := m.st.Admin().Stats(), m.st.Admin().OpenReservations()
	// Each reason's counter is read once, so that the total and the
	// contention share (the total less the budget's) only grow.
	contended, overBudget := m.st.Admin().LookupsShedUnderContention(), m.st.Admin().LookupsShedOverBudget()
	snap := metrics.Snapshot{Reservations: open.Reservations, Slots: open.Slots, HintsDropped: m.st.Evictor().HintsDropped(),
		LookupsShed: contended + overBudget, LookupsShedOverBudget: overBudget}
	for i, t := range st.Tiers {
		snap.Tiers = append(snap.Tiers, metrics.Tier{Name: t.Kind.String(), Capacity: t.Capacity, Used: t.Used,
			SlotBytes: open.TierSlotBytes[i], Fault: t.Fault.String()})
	}
	snap.Cutoffs, snap.CutoffEpoch, snap.Coordinated = m.st.Evictor().CutoffState()
	for _, ns := range m.st.Admin().Namespaces() {
		puts := make(map[metrics.PutOutcome]uint64, len(putOutcomes))
		for status, outcome := range putOutcomes {
			puts[outcome] = ns.Puts[status]
		}
		snap.Namespaces = append(snap.Namespaces, metrics.Namespace{ID: ns.ID, PageBytes: ns.PageBytes,
			TierPages: ns.TierPages, Lookups: ns.Lookups, LookupKeys: ns.LookupKeys, HitKeys: ns.HitKeys,
			Puts: puts, Rejected: ns.Rejected, Evicted: ns.Evicted, Corrupt: ns.Corrupt, Deleted: ns.Deleted, Handed: ns.Handed,
			Expired: ns.Expired, Orphaned: ns.Orphaned, Demoted: ns.Demoted, Leases: ns.Leases,
			LeasesExpired: ns.LeasesExpired})
	}
	snap.Tenants = tenantUsage(m.st.Admin().Usage(), open.Tenants)
	return snap
}

// tenantUsage is the store's per-tenant usage in tenant order, with open's
// split of its open reservations (slots apart), which u's lump together as
// the quotas count them.
func tenantUsage(u map[string]store.Usage, open map[string]store.OpenCounts) []metrics.TenantUsage {
	out := make([]metrics.TenantUsage, 0, len(u))
	for t, v := range u {
		o := open[t]
		out = append(out, metrics.TenantUsage{Tenant: t, Bytes: v.Bytes, ReserveBytes: o.ReserveBytes,
			Reservations: o.Reservations, SlotBytes: o.SlotBytes, Slots: o.Slots, Leases: v.Leases})
	}
	slices.SortFunc(out, func(a, b metrics.TenantUsage) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out
}

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Forks. Namespaces of one model identity — tenant, model and revision,
// adapter and revision, tokenizer revision: namespace.Descriptor.ForkKey —
// that differ in a layout factor (TP/PP/CP shape, page size, dtype, engine
// KV format) are forks of one cache: their pages have other shapes, so a
// replica of one layout misses every page a replica of another wrote.
// Scaling out with a different TP size forks the cache instead of growing
// it, and the hit rate drops with no error anywhere.
//
// A fork is one layout: a descriptor with its ranks set to zero. The shards
// of one replica layout (tp_rank 0 to 3 of a TP4 deployment, each its own
// namespace) are one fork, not four: they divide each page between them
// and lose nothing.
//
// A format fork is forks whose page formats (descriptor page_format: how
// a page's bytes are laid out, as the engine adapters derive it) differ:
// whatever else differs, a replica of one cannot read the other's pages
// byte for byte, so ns forks says so and shows the formats side by side
// rather than the TP size or version that may differ with them.

// identityFields are the fields of the fork key: namespaces that differ in
// one of them are different models, never forks.
var identityFields = []string{"tenant", "model", "model_revision", "adapter", "adapter_revision", "tokenizer_revision"}

// fork is one layout of a model and the namespaces (shards) that use it.
type fork struct {
	layout namespace.Descriptor // normalized, ranks zero
	shards []*admin.Namespace   // by tp, pp, cp rank, then ID
	sum    *pb.NamespaceInfo    // the shards' counts summed
}

// forkGroup is the forks of one model identity.
type forkGroup struct {
	key    string // namespace.Descriptor.ForkKey
	forks  []*fork
	differ []string // layout fields in which some forks differ, canonical names, sorted
}

// Fork kinds, as ns forks names them.
const (
	kindLayout = "layout" // pages of other shapes: TP/PP/CP, page size, dtype, engine version
	kindFormat = "format" // pages in other byte formats (page_format differs)
)

// forkKind is kindFormat when page_format is among the differing fields.
func forkKind(differ []string) string {
	if slices.Contains(differ, "page_format") {
		return kindFormat
	}
	return kindLayout
}

// layoutOf is d normalized with its ranks zeroed.
func layoutOf(d namespace.Descriptor) namespace.Descriptor {
	d = d.Normalize()
	d.TPRank, d.PPRank, d.CPRank = 0, 0, 0
	return d
}

// groupForks groups namespaces by model identity and, within one, by
// layout, and returns the identities with more than one layout, and how
// many namespaces had a descriptor to group by.
func groupForks(nss []*admin.Namespace) (groups []*forkGroup, checked int) {
	byKey := map[string]*forkGroup{}
	var all []*forkGroup
	for _, t := range nss {
		if t.Info.GetDescriptor_() == nil {
			continue
		}
		checked++
		d := pbconv.Descriptor(t.Info.GetDescriptor_())
		key := d.ForkKey()
		g, ok := byKey[key]
		if !ok {
			g = &forkGroup{key: key}
			byKey[key] = g
			all = append(all, g)
		}
		layout := layoutOf(d)
		i := slices.IndexFunc(g.forks, func(f *fork) bool { return f.layout.ID() == layout.ID() })
		if i < 0 {
			g.forks = append(g.forks, &fork{layout: layout, sum: &pb.NamespaceInfo{}})
			i = len(g.forks) - 1
		}
		f := g.forks[i]
		f.shards = append(f.shards, t)
		admin.AddNamespace(f.sum, t.Info)
	}
	for _, g := range all {
		if len(g.forks) < 2 {
			continue
		}
		g.finish()
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *forkGroup) int {
		da, db := a.forks[0].layout, b.forks[0].layout
		return cmp.Or(cmp.Compare(da.Tenant, db.Tenant), cmp.Compare(da.Model, db.Model),
			cmp.Compare(da.ModelRevision, db.ModelRevision), cmp.Compare(da.Adapter, db.Adapter),
			cmp.Compare(a.key, b.key))
	})
	return groups, checked
}

// finish computes what differs and puts the forks in order: most bytes
// first, then by their differing values; shards by rank.
func (g *forkGroup) finish() {
	seen := map[string]bool{}
	for _, f := range g.forks[1:] {
		for _, name := range namespace.LayoutDiff(g.forks[0].layout, f.layout) {
			seen[name] = true
		}
	}
	g.differ = nil
	for name := range seen {
		g.differ = append(g.differ, name)
	}
	slices.Sort(g.differ)
	for _, f := range g.forks {
		slices.SortFunc(f.shards, func(a, b *admin.Namespace) int {
			da, db := a.Info.GetDescriptor_(), b.Info.GetDescriptor_()
			return cmp.Or(cmp.Compare(da.GetTpRank(), db.GetTpRank()), cmp.Compare(da.GetPpRank(), db.GetPpRank()),
				cmp.Compare(da.GetCpRank(), db.GetCpRank()), cmp.Compare(hexOf(a.Info.GetId()), hexOf(b.Info.GetId())))
		})
	}
	slices.SortStableFunc(g.forks, func(a, b *fork) int {
		return cmp.Or(cmp.Compare(b.sum.GetBytes(), a.sum.GetBytes()),
			compareValues(a.layout, b.layout, g.differ))
	})
}

// compareValues orders two descriptors by the given fields' values,
// numbers by value.
func compareValues(a, b namespace.Descriptor, fields []string) int {
	va, vb := fieldValues(a), fieldValues(b)
	for _, name := range fields {
		x, y := va[name], vb[name]
		var nx, ny uint64
		if json.Unmarshal(x, &nx) == nil && json.Unmarshal(y, &ny) == nil {
			if c := cmp.Compare(nx, ny); c != 0 {
				return c
			}
			continue
		}
		if c := strings.Compare(string(x), string(y)); c != 0 {
			return c
		}
	}
	return 0
}

// fieldValues is d's canonical encoding by field name: strings quoted,
// numbers bare, extra and compute as JSON objects.
func fieldValues(d namespace.Descriptor) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Canonical(), &m); err != nil {
		panic(fmt.Sprintf("canonical descriptor does not decode: %v", err)) // programmer error in package namespace
	}
	return m
}

// showValue is a canonical value for people: strings unquoted ("-" when
// empty), anything else as encoded.
func showValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return orNone(s)
	}
	return string(v)
}

// layoutLabel names a layout by the fields that tell it apart:
// "tp_size=4", "tp_size=4 page_tokens=32".
func layoutLabel(d namespace.Descriptor, fields []string) string {
	vals := fieldValues(d)
	parts := make([]string, len(fields))
	for i, name := range fields {
		parts[i] = name + "=" + showValue(vals[name])
	}
	return strings.Join(parts, " ")
}

// forkMeaning says in one line what forks mean for hit rates; labels name
// each fork's layout (layoutLabel), in the order listed.
func forkMeaning(labels []string) string {
	const lead = "these namespaces cache the same model but cannot share pages: "
	if len(labels) == 2 {
		return lead + fmt.Sprintf("requests routed to a %s replica miss pages written by %s replicas, and the other way round",
			labels[0], labels[1])
	}
	return lead + fmt.Sprintf("requests routed to a replica of one layout (%s) miss the pages written by replicas of the other %d",
		strings.Join(labels, "; "), len(labels)-1)
}

// formatForkMeaning says in one line what a format fork means; formats
// are each fork's page format, in the order listed ("-" for none stated).
func formatForkMeaning(formats []string) string {
	return "format fork: these namespaces cache the same model in different page byte formats (" +
		strings.Join(formats, " | ") + "): a replica of one cannot read the pages of another, " +
		"so requests routed to it miss every page written in another format"
}

// forkHint says how to make forks share one cache again.
func forkHint(differ []string) string {
	return "to share one cache, run every replica of this model with the same " + joinAnd(differ) +
		"; until then each fork needs its own cache capacity"
}

// joinAnd is "a", "a and b", "a, b and c".
func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// Relations between two namespaces, as ns diff names them.
const (
	relSame      = "same"      // one namespace
	relShards    = "shards"    // one layout, other ranks
	relForks     = "forks"     // one model, other layouts
	relUnrelated = "unrelated" // other models or tenants
)

// relate says how two descriptors' namespaces relate, what that means for
// sharing pages, and the fields that differ (canonical names).
func relate(a, b namespace.Descriptor) (relation, meaning string, differ []string) {
	differ = namespace.LayoutDiff(a, b)
	var ident []string
	for _, name := range differ {
		if slices.Contains(identityFields, name) {
			ident = append(ident, name)
		}
	}
	switch {
	case len(differ) == 0:
		return relSame, "the same namespace: every page is shared", differ
	case slices.Contains(ident, "tenant"):
		return relUnrelated, "different tenants: pages are never shared between tenants, by design", differ
	case len(ident) > 0:
		return relUnrelated, fmt.Sprintf("different models (%s differs): they never share pages, by design; not a fork",
			joinAnd(ident)), differ
	}
	layoutDiff := namespace.LayoutDiff(layoutOf(a), layoutOf(b))
	if len(layoutDiff) == 0 {
		return relShards, fmt.Sprintf("shards of one layout (%s differs): each rank stores its own part of every page; "+
			"together they are one cache and nothing is lost", joinAnd(differ)), differ
	}
	if forkKind(layoutDiff) == kindFormat {
		na, nb := a.Normalize(), b.Normalize()
		return relForks, formatForkMeaning([]string{orNone(na.PageFormat), orNone(nb.PageFormat)}), differ
	}
	return relForks, forkMeaning([]string{layoutLabel(a, layoutDiff), layoutLabel(b, layoutDiff)}), differ
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

func newNSForksCmd(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "forks",
		Short: "Find models whose cache is split by replicas of different layouts",
		Long: `Find forks: namespaces of one model (same tenant, model, revision, adapter
and tokenizer) that differ in a layout factor — TP/PP/CP shape, page size,
dtype, KV dtype, engine KV format, page format. Their pages have other
shapes, so they cannot be shared: a replica of one layout misses every page
that replicas of the other wrote. Adding replicas with a different TP size
forks the cache instead of growing it, and the hit rate drops with no error
anywhere.

For each model with more than one layout it prints the fields that differ,
then one row per fork (layout): its values of those fields, how many
namespaces (shards: one per TP/PP/CP rank) it has and the first one's ID,
the page size, and pages, bytes and hit rate summed over its shards and
over every alive member. A line then says what that means for hit rates.
Forks whose page formats (how a page's bytes are laid out) differ are format
forks: a replica of one cannot read the other's pages, and the line shows
the formats side by side.

Shards of one layout (tp_rank 0..3 of a TP4 replica) are not forks: they
split each page between them and lose nothing.`,
		Args: cobra.NoArgs,
		RunE: g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
			nss, err := g.namespaces(cmd, c, tenant)
			if err != nil {
				return err
			}
			groups, checked := groupForks(nss)
			doc := struct {
				NodeID     string          `json:"node_id"` // the node asked
				Namespaces int             `json:"namespaces"`
				Groups     []forkGroupJSON `json:"groups"`
			}{c.NodeID(), checked, []forkGroupJSON{}}
			for _, fg := range groups {
				doc.Groups = append(doc.Groups, forkGroupView(fg))
			}
			return g.report(cmd, doc, func(w io.Writer) error { return writeForks(w, groups, checked) }, nil)
		}),
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's namespaces")
	return cmd
}

// forkGroupJSON is one model with more than one layout.
type forkGroupJSON struct {
	ForkKey string `json:"fork_key"`
	identityJSON
	Kind    string     `json:"kind"`   // "format" when the forks' page formats differ, else "layout"
	Differ  []string   `json:"differ"` // descriptor fields (canonical names) in which forks differ
	Meaning string     `json:"meaning"`
	Hint    string     `json:"hint"`
	Pages   uint64     `json:"pages"` // over every fork
	Bytes   uint64     `json:"bytes"`
	Forks   []forkJSON `json:"forks"` // most bytes first
}

// forkJSON is one layout of a model.
type forkJSON struct {
	Values    map[string]json.RawMessage `json:"values"` // the differing fields' values
	PageBytes uint64                     `json:"page_bytes"`
	usageJSON
	Shards []forkShardJSON `json:"shards"` // by rank
}

// forkShardJSON is one namespace of a fork.
type forkShardJSON struct {
	ID     string   `json:"id"`
	TPRank uint32   `json:"tp_rank"`
	PPRank uint32   `json:"pp_rank"`
	CPRank uint32   `json:"cp_rank"`
	Pages  uint64   `json:"pages"`
	Bytes  uint64   `json:"bytes"`
	Nodes  []string `json:"nodes"` // IDs of the nodes holding its pages
}

func forkGroupView(fg *forkGroup) forkGroupJSON {
	d := fg.forks[0].layout
	v := forkGroupJSON{ForkKey: fg.key, identityJSON: identityJSON{Tenant: d.Tenant, Model: d.Model,
		ModelRevision: d.ModelRevision, Adapter: d.Adapter, AdapterRevision: d.AdapterRevision,
		TokenizerRevision: d.TokenizerRevision},
		Kind: forkKind(fg.differ), Differ: fg.differ, Meaning: groupMeaning(fg), Hint: forkHint(fg.differ), Forks: []forkJSON{}}
	for _, f := range fg.forks {
		vals := fieldValues(f.layout)
		fj := forkJSON{Values: map[string]json.RawMessage{}, PageBytes: f.sum.GetPageBytes(), usageJSON: usageView(f.sum),
			Shards: []forkShardJSON{}}
		for _, name := range fg.differ {
			fj.Values[name] = vals[name]
		}
		for _, t := range f.shards {
			sd := t.Info.GetDescriptor_()
			fj.Shards = append(fj.Shards, forkShardJSON{ID: hexOf(t.Info.GetId()), TPRank: sd.GetTpRank(),
				PPRank: sd.GetPpRank(), CPRank: sd.GetCpRank(), Pages: t.Info.GetPages(), Bytes: t.Info.GetBytes(),
				Nodes: t.Holders()})
		}
		v.Pages += fj.Pages
		v.Bytes += fj.Bytes
		v.Forks = append(v.Forks, fj)
	}
	return v
}

// forkLabels names each fork of fg by its differing values.
func forkLabels(fg *forkGroup) []string {
	labels := make([]string, len(fg.forks))
	for i, f := range fg.forks {
		labels[i] = layoutLabel(f.layout, fg.differ)
	}
	return labels
}

// groupMeaning is fg's meaning line: a format fork's shows the formats
// side by side.
func groupMeaning(fg *forkGroup) string {
	if forkKind(fg.differ) != kindFormat {
		return forkMeaning(forkLabels(fg))
	}
	formats := make([]string, len(fg.forks))
	for i, f := range fg.forks {
		formats[i] = orNone(f.layout.PageFormat)
	}
	return formatForkMeaning(formats)
}

// writeForks prints each group: a line naming the model, the forks'
// table, then what it means and how to mend it; groups blank-line apart.
func writeForks(w io.Writer, groups []*forkGroup, checked int) error {
	if len(groups) == 0 {
		_, err := fmt.Fprintf(w, "no forks: every model has one layout (%d namespaces checked)\n", checked)
		return err
	}
	for i, fg := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := writeForkGroup(w, fg); err != nil {
			return err
		}
	}
	return nil
}

func writeForkGroup(w io.Writer, fg *forkGroup) error {
	d := fg.forks[0].layout
	ident := fmt.Sprintf("tenant %s, model %s, revision %s", d.Tenant, d.Model, orNone(d.ModelRevision))
	if d.Adapter != "" {
		ident += fmt.Sprintf(", adapter %s@%s", d.Adapter, orNone(d.AdapterRevision))
	}
	if d.TokenizerRevision != "" {
		ident += ", tokenizer " + d.TokenizerRevision
	}
	kind := ""
	if forkKind(fg.differ) == kindFormat {
		kind = "format "
	}
	fmt.Fprintf(w, "%s: %d %sforks, differing in %s\n", ident, len(fg.forks), kind, joinAnd(fg.differ))
	tw := newTable(w)
	head := []any{"FORK"}
	for _, name := range fg.differ {
		head = append(head, strings.ToUpper(name))
	}
	head = append(head, "SHARDS", "ID")
	sizeCol := !slices.Contains(fg.differ, "page_bytes")
	if sizeCol {
		head = append(head, "PAGE_BYTES")
	}
	row(tw, append(head, "PAGES", "BYTES", "HIT%")...)
	for i, f := range fg.forks {
		vals := fieldValues(f.layout)
		cells := []any{i + 1}
		for _, name := range fg.differ {
			cells = append(cells, showValue(vals[name]))
		}
		cells = append(cells, len(f.shards), shortHex(f.shards[0].Info.GetId(), shortIDHex))
		if sizeCol {
			cells = append(cells, humanBytes(f.sum.GetPageBytes()))
		}
		row(tw, append(cells, f.sum.GetPages(), humanBytes(f.sum.GetBytes()), formatHitRate(f.sum))...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "meaning: %s\nhint: %s\n", groupMeaning(fg), forkHint(fg.differ))
	return err
}

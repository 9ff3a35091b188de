package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/proto/pbconv"
)

func newNSDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff <id-or-prefix> <id-or-prefix>",
		Short: "Compare two namespaces' descriptors side by side",
		Long: `Print every descriptor field of two namespaces side by side, marking with
"*" those that differ, then their statistics (summed over every alive
member), how the two relate and what that means for sharing pages:

  same       one namespace: every page is shared
  shards     one layout, other ranks (tp_rank, pp_rank, cp_rank): each rank
             stores its part of every page; nothing is lost
  forks      one model, another layout (TP size, page size, dtype, ...):
             neither can use the other's pages (see strata ns forks)
  unrelated  other models, revisions, adapters or tenants: never shared,
             by design`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			refs := make([]nsRef, 2)
			for i, arg := range args {
				var err error
				if refs[i], err = parseNSRef(arg); err != nil {
					return err
				}
			}
			return g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
				var ts [2]*admin.Namespace
				for i, ref := range refs {
					ns, err := g.resolveNamespace(cmd.Context(), cmd.ErrOrStderr(), c, ref)
					if err != nil {
						return err
					}
					ts[i] = ns.Total
				}
				doc := diffNamespaces(ts[0], ts[1])
				doc.NodeID = c.NodeID()
				return g.report(cmd, doc, func(w io.Writer) error { return writeNSDiff(w, doc) }, nil)
			})(cmd, args)
		},
	}
}

// nsDiffJSON is `ns diff`.
type nsDiffJSON struct {
	NodeID   string          `json:"node_id"` // the node asked
	A        namespaceJSON   `json:"a"`
	B        namespaceJSON   `json:"b"`
	Fields   []diffFieldJSON `json:"fields"`   // every descriptor field, as ns show names them
	Differ   []string        `json:"differ"`   // differing fields by canonical name (extra and compute whole)
	Relation string          `json:"relation"` // same, shards, forks or unrelated
	Meaning  string          `json:"meaning"`
}

// diffFieldJSON is one descriptor field of both namespaces.
type diffFieldJSON struct {
	Name    string `json:"name"`
	A       string `json:"a"`
	B       string `json:"b"`
	Differs bool   `json:"differs"`
}

func diffNamespaces(a, b *admin.Namespace) nsDiffJSON {
	da, db := a.Info.GetDescriptor_(), b.Info.GetDescriptor_()
	doc := nsDiffJSON{A: namespaceView(a), B: namespaceView(b), Fields: []diffFieldJSON{}}
	fa, fb := descriptorFields(da), descriptorFields(db)
	for i := range fa {
		doc.Fields = append(doc.Fields, diffFieldJSON{Name: fa[i][0], A: fa[i][1], B: fb[i][1], Differs: fa[i][1] != fb[i][1]})
	}
	doc.Relation, doc.Meaning, doc.Differ = relate(pbconv.Descriptor(da), pbconv.Descriptor(db))
	if doc.Differ == nil {
		doc.Differ = []string{}
	}
	return doc
}

// writeNSDiff prints both IDs, the fields side by side with "*" before
// those that differ, the statistics, and the relation with its meaning.
func writeNSDiff(w io.Writer, doc nsDiffJSON) error {
	fmt.Fprintf(w, "a: %s\nb: %s\n", doc.A.ID, doc.B.ID)
	tw := newTable(w)
	row(tw, "", "FIELD", "A", "B")
	for _, f := range doc.Fields {
		mark := ""
		if f.Differs {
			mark = "*"
		}
		row(tw, mark, f.Name, f.A, f.B)
	}
	stat := func(name string, a, b any) { row(tw, "", name, a, b) }
	stat("page_size", humanBytes(doc.A.PageBytes), humanBytes(doc.B.PageBytes))
	stat("pages", doc.A.Pages, doc.B.Pages)
	stat("bytes", humanBytes(doc.A.Bytes), humanBytes(doc.B.Bytes))
	stat("hit_rate", formatPercent(doc.A.HitRate), formatPercent(doc.B.HitRate))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "relation: %s\nmeaning: %s\n", doc.Relation, doc.Meaning)
	return err
}

// formatPercent is a percentage as "87.5%", or none for nil.
func formatPercent(p *float64) string {
	if p == nil {
		return none
	}
	return fmt.Sprintf("%.1f%%", *p)
}

package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

func newNSLsCmd(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List namespaces with their geometry, size and hit rate",
		Long: `List the namespaces the cluster knows (those the token may see), sorted so
that forks of one model (same tenant, model and revision) sit together.

Every alive member is asked; PAGES, BYTES, HIT% and LEASES are sums over
them, and NODES (shown when the cluster has more than one member) counts
the nodes that hold pages of the namespace. A member that fails is
reported on stderr and left out of the sums.

HIT% is the share of looked-up keys that were found: hit_keys / lookup_keys.`,
		Args: cobra.NoArgs,
		RunE: g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
			nss, err := g.namespaces(cmd, c, tenant)
			if err != nil {
				return err
			}
			doc := struct {
				NodeID     string          `json:"node_id"` // the node asked
				Namespaces []namespaceJSON `json:"namespaces"`
			}{NodeID: c.NodeID(), Namespaces: []namespaceJSON{}}
			for _, t := range nss {
				doc.Namespaces = append(doc.Namespaces, namespaceView(t))
			}
			return g.report(cmd, doc, func(w io.Writer) error { return writeNSLs(w, nss, c.Multi()) }, nil)
		}),
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's namespaces")
	return cmd
}

// writeNSLs prints one row per namespace; nodes adds the NODES column.
func writeNSLs(w io.Writer, nss []*admin.Namespace, nodes bool) error {
	tw := newTable(w)
	head := []any{"ID", "TENANT", "MODEL", "REVISION", "ENGINE", "DTYPE", "TP", "PAGE_TOKENS", "PAGE_BYTES"}
	if nodes {
		head = append(head, "NODES")
	}
	row(tw, append(head, "PAGES", "BYTES", "HIT%", "LEASES")...)
	for _, t := range nss {
		n, d := t.Info, t.Info.GetDescriptor_()
		cells := []any{shortHex(n.GetId(), shortIDHex), orNone(d.GetTenant()), orNone(d.GetModel()),
			orNone(d.GetModelRevision()), orNone(d.GetEngine()), orNone(d.GetDtype()), max(d.GetTpSize(), 1),
			d.GetPageTokens(), humanBytes(n.GetPageBytes())}
		if nodes {
			cells = append(cells, len(t.Holders()))
		}
		row(tw, append(cells, n.GetPages(), humanBytes(n.GetBytes()), formatHitRate(n), n.GetLeasesActive())...)
	}
	return tw.Flush()
}

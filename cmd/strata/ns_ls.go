package main

import (
	"cmp"
	"slices"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNSLsCmd(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List namespaces with their geometry, size and hit rate",
		Long: `List the namespaces the node knows (those the token may see), sorted so
that forks of one model (same tenant, model and revision) sit together.

HIT% is the share of looked-up keys that were found: hit_keys / lookup_keys.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := invoke(cmd.Context(), c, c.admin.ListNamespaces, &pb.ListNamespacesRequest{Tenant: tenant})
			if err != nil {
				return err
			}
			nss := resp.GetNamespaces()
			slices.SortFunc(nss, compareNamespaces)
			if g.json() {
				return writeNSLsJSON(cmd, resp.GetNodeId(), nss)
			}
			return writeNSLsTable(cmd, nss)
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's namespaces")
	return cmd
}

// compareNamespaces orders by tenant, model, revision, adapter, then ID.
func compareNamespaces(a, b *pb.NamespaceInfo) int {
	da, db := a.GetDescriptor_(), b.GetDescriptor_()
	return cmp.Or(
		cmp.Compare(da.GetTenant(), db.GetTenant()),
		cmp.Compare(da.GetModel(), db.GetModel()),
		cmp.Compare(da.GetModelRevision(), db.GetModelRevision()),
		cmp.Compare(da.GetAdapter(), db.GetAdapter()),
		cmp.Compare(hexOf(a.GetId()), hexOf(b.GetId())),
	)
}

func writeNSLsTable(cmd *cobra.Command, nss []*pb.NamespaceInfo) error {
	tw := newTable(cmd.OutOrStdout())
	row(tw, "ID", "TENANT", "MODEL", "REVISION", "ENGINE", "DTYPE", "TP", "PAGE_TOKENS", "PAGE_BYTES",
		"PAGES", "BYTES", "HIT%", "LEASES")
	for _, n := range nss {
		d := n.GetDescriptor_()
		row(tw, shortHex(n.GetId(), shortIDHex), orNone(d.GetTenant()), orNone(d.GetModel()),
			orNone(d.GetModelRevision()), orNone(d.GetEngine()), orNone(d.GetDtype()), max(d.GetTpSize(), 1),
			d.GetPageTokens(), humanBytes(n.GetPageBytes()), n.GetPages(), humanBytes(n.GetBytes()),
			formatHitRate(n), n.GetLeasesActive())
	}
	return tw.Flush()
}

func writeNSLsJSON(cmd *cobra.Command, nodeID string, nss []*pb.NamespaceInfo) error {
	doc := struct {
		NodeID     string          `json:"node_id"`
		Namespaces []namespaceJSON `json:"namespaces"`
	}{NodeID: nodeID, Namespaces: []namespaceJSON{}}
	for _, n := range nss {
		doc.Namespaces = append(doc.Namespaces, namespaceView(n))
	}
	return writeJSON(cmd.OutOrStdout(), doc)
}

package main

import (
	"cmp"
	"context"
	"io"
	"slices"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.dialFleet(cmd.Context())
			if err != nil {
				return err
			}
			defer f.Close()
			nss, err := listNamespaces(cmd.Context(), cmd.ErrOrStderr(), f, tenant)
			if err != nil {
				return err
			}
			if g.json() {
				return writeNSLsJSON(cmd, f.view.GetNodeId(), nss)
			}
			return writeNSLsTable(cmd, nss, f.multi())
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's namespaces")
	return cmd
}

// listNamespaces asks every member for its namespaces (of tenant, or all
// the token may see) and sums them by ID, ordered by compareNamespaces. A
// member that fails is reported on w (see settle).
func listNamespaces(ctx context.Context, w io.Writer, f *fleet, tenant string) ([]*nsTotal, error) {
	rs := gather(ctx, f.asked(), func(ctx context.Context, c *conn) (*pb.ListNamespacesResponse, error) {
		return invoke(ctx, c, c.admin.ListNamespaces, &pb.ListNamespacesRequest{Tenant: tenant})
	})
	if err := settle(w, rs); err != nil {
		return nil, err
	}
	var parts []nodeNS
	for _, r := range answered(rs) {
		for _, n := range r.val.GetNamespaces() {
			parts = append(parts, nodeNS{node: r.GetNodeId(), info: n})
		}
	}
	nss := sumNamespaces(parts)
	slices.SortFunc(nss, func(a, b *nsTotal) int { return compareNamespaces(a.info, b.info) })
	return nss, nil
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

// writeNSLsTable prints one row per namespace; nodes adds the NODES column.
func writeNSLsTable(cmd *cobra.Command, nss []*nsTotal, nodes bool) error {
	tw := newTable(cmd.OutOrStdout())
	head := []any{"ID", "TENANT", "MODEL", "REVISION", "ENGINE", "DTYPE", "TP", "PAGE_TOKENS", "PAGE_BYTES"}
	if nodes {
		head = append(head, "NODES")
	}
	row(tw, append(head, "PAGES", "BYTES", "HIT%", "LEASES")...)
	for _, t := range nss {
		n, d := t.info, t.info.GetDescriptor_()
		cells := []any{shortHex(n.GetId(), shortIDHex), orNone(d.GetTenant()), orNone(d.GetModel()),
			orNone(d.GetModelRevision()), orNone(d.GetEngine()), orNone(d.GetDtype()), max(d.GetTpSize(), 1),
			d.GetPageTokens(), humanBytes(n.GetPageBytes())}
		if nodes {
			cells = append(cells, len(t.holders()))
		}
		row(tw, append(cells, n.GetPages(), humanBytes(n.GetBytes()), formatHitRate(n), n.GetLeasesActive())...)
	}
	return tw.Flush()
}

// writeNSLsJSON prints the namespaces; node_id is the node asked.
func writeNSLsJSON(cmd *cobra.Command, nodeID string, nss []*nsTotal) error {
	doc := struct {
		NodeID     string          `json:"node_id"`
		Namespaces []namespaceJSON `json:"namespaces"`
	}{NodeID: nodeID, Namespaces: []namespaceJSON{}}
	for _, t := range nss {
		doc.Namespaces = append(doc.Namespaces, namespaceView(t))
	}
	return writeJSON(cmd.OutOrStdout(), doc)
}

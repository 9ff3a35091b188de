package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

func newLeaseLsCmd(g *globals) *cobra.Command {
	var (
		tenant string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the active read leases, soonest expiry first",
		Long: `List the read leases the cluster holds (those the token may see): each
pins the pages of a lookup's hit prefix on one node until it is released
or expires, and pinned pages are never evicted, moved or overwritten.
Many long leases on a full node leave little room to evict.

Every alive member is asked; in a cluster of more than one member the
NODE column says which node holds each lease. EXPIRES_IN is from now.
When --limit cuts the list, stderr says how many more there are; -o json
carries the count as total.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must not be negative, got %d", limit)
			}
			return g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
				return runLeaseLs(cmd, c, g, tenant, limit)
			})(cmd, nil)
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's leases")
	cmd.Flags().IntVar(&limit, "limit", 1000, "most leases to list; 0 lists them all")
	return cmd
}

// leaseJSON is a LeaseInfo.
type leaseJSON struct {
	NodeID        string `json:"node_id"`
	LeaseID       uint64 `json:"lease_id"`
	NamespaceID   string `json:"namespace_id"`
	Tenant        string `json:"tenant"`
	Pages         uint64 `json:"pages"`
	ExpiresUnixMs int64  `json:"expires_unix_ms"`
}

func runLeaseLs(cmd *cobra.Command, c *admin.Cluster, g *globals, tenant string, limit int) error {
	rows, total, failed, err := c.Leases(cmd.Context(), tenant, limit)
	if err := g.settle(cmd.ErrOrStderr(), failed, err); err != nil {
		return err
	}
	doc := struct {
		NodeID string      `json:"node_id"` // the node asked
		Total  uint64      `json:"total"`   // leases that matched, listed or not
		Leases []leaseJSON `json:"leases"`
	}{c.NodeID(), total, []leaseJSON{}}
	for _, r := range rows {
		l := r.Info
		doc.Leases = append(doc.Leases, leaseJSON{NodeID: r.Node, LeaseID: l.GetLeaseId(),
			NamespaceID: hexOf(l.GetNamespaceId()), Tenant: l.GetTenant(), Pages: l.GetPages(),
			ExpiresUnixMs: l.GetExpiresUnixMs()})
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		if err := writeLeases(w, rows, c.Multi(), time.Now()); err != nil {
			return err
		}
		if more := total - uint64(len(rows)); more > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "%d more leases not listed (raise --limit)\n", more)
		}
		return nil
	}, nil)
}

// writeLeases prints one row per lease; nodes adds the NODE column.
func writeLeases(w io.Writer, rows []admin.LeaseRow, nodes bool, now time.Time) error {
	tw := newTable(w)
	head := []any{"LEASE"}
	if nodes {
		head = append(head, "NODE")
	}
	row(tw, append(head, "NAMESPACE", "TENANT", "PAGES", "EXPIRES_IN")...)
	for _, r := range rows {
		l := r.Info
		cells := []any{l.GetLeaseId()}
		if nodes {
			cells = append(cells, r.Node)
		}
		row(tw, append(cells, shortHex(l.GetNamespaceId(), shortIDHex), orNone(l.GetTenant()), l.GetPages(),
			formatAge(time.UnixMilli(l.GetExpiresUnixMs()).Sub(now)))...)
	}
	return tw.Flush()
}

package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
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
			return runLeaseLs(cmd, g, tenant, limit)
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's leases")
	cmd.Flags().IntVar(&limit, "limit", 1000, "most leases to list; 0 lists them all")
	return cmd
}

// leaseRow is one lease and the node that holds it.
type leaseRow struct {
	node string
	info *pb.LeaseInfo
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

func runLeaseLs(cmd *cobra.Command, g *globals, tenant string, limit int) error {
	f, err := g.dialFleet(cmd.Context())
	if err != nil {
		return err
	}
	defer f.Close()
	rs := gather(cmd.Context(), f.asked(), func(ctx context.Context, c *conn) (*pb.ListLeasesResponse, error) {
		return invoke(ctx, c, c.admin.ListLeases, &pb.ListLeasesRequest{Tenant: tenant, Limit: uint32(limit)})
	})
	if err := settle(cmd.ErrOrStderr(), rs); err != nil {
		return err
	}
	var rows []leaseRow
	var total uint64
	for _, r := range answered(rs) {
		total += max(r.val.GetTotal(), uint64(len(r.val.GetLeases())))
		for _, l := range r.val.GetLeases() {
			rows = append(rows, leaseRow{node: r.GetNodeId(), info: l})
		}
	}
	slices.SortFunc(rows, func(a, b leaseRow) int {
		return cmp.Or(cmp.Compare(a.info.GetExpiresUnixMs(), b.info.GetExpiresUnixMs()),
			cmp.Compare(a.node, b.node), cmp.Compare(a.info.GetLeaseId(), b.info.GetLeaseId()),
			bytes.Compare(a.info.GetNamespaceId(), b.info.GetNamespaceId()))
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	if g.json() {
		doc := struct {
			NodeID string      `json:"node_id"` // the node asked
			Total  uint64      `json:"total"`   // leases that matched, listed or not
			Leases []leaseJSON `json:"leases"`
		}{f.view.GetNodeId(), total, []leaseJSON{}}
		for _, r := range rows {
			l := r.info
			doc.Leases = append(doc.Leases, leaseJSON{NodeID: r.node, LeaseID: l.GetLeaseId(),
				NamespaceID: hexOf(l.GetNamespaceId()), Tenant: l.GetTenant(), Pages: l.GetPages(),
				ExpiresUnixMs: l.GetExpiresUnixMs()})
		}
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	if err := writeLeases(cmd.OutOrStdout(), rows, f.multi(), time.Now()); err != nil {
		return err
	}
	if more := total - uint64(len(rows)); more > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%d more leases not listed (raise --limit)\n", more)
	}
	return nil
}

// writeLeases prints one row per lease; nodes adds the NODE column.
func writeLeases(w io.Writer, rows []leaseRow, nodes bool, now time.Time) error {
	tw := newTable(w)
	head := []any{"LEASE"}
	if nodes {
		head = append(head, "NODE")
	}
	row(tw, append(head, "NAMESPACE", "TENANT", "PAGES", "EXPIRES_IN")...)
	for _, r := range rows {
		l := r.info
		cells := []any{l.GetLeaseId()}
		if nodes {
			cells = append(cells, r.node)
		}
		row(tw, append(cells, shortHex(l.GetNamespaceId(), shortIDHex), orNone(l.GetTenant()), l.GetPages(),
			formatAge(time.UnixMilli(l.GetExpiresUnixMs()).Sub(now)))...)
	}
	return tw.Flush()
}

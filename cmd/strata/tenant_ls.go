package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/registry"
)

func newTenantLsCmd(g *globals, f *tenantFlags) *cobra.Command {
	return f.command(g, "ls", "List the tenants in etcd: role, quotas, usage, token hash prefix",
		`List the tenants in etcd, in name order: whether each is an admin, its
per-node quotas (- for no bound), what it holds summed over the nodes
(published bytes, open reservations, the shm slots granted ahead of its
puts, active leases; asked of every member through --endpoints with
--token, so the admin token shows every tenant) and the first 12 hex digits
of its token's SHA-256 (the token itself is not stored). Nodes that do not
answer are named and left out of the sums; with no node answering, the
usage columns show ?.

USED is its published bytes; RESERVED and OPEN the bytes and count of its
open reservations (puts in flight); SLOT_BYTES and SLOTS those of the arena
slots its same-host (shm) connections hold for pages not yet put, which
each connection keeps while it lives; HELD its read leases. The
RESERVE_BYTES and RESERVATIONS quotas bound reservations and slots
together, and BYTES bounds them with the published bytes.`, cobra.NoArgs,
		func(ctx context.Context, reg *registry.Registry, _ []string) (any, string, error) {
			return listTenants(ctx, g, reg)
		})
}

// tenantRow is a tenant of strata tenant ls -o json: its record in etcd and
// what it holds over the nodes that answered.
type tenantRow struct {
	registry.Tenant
	Usage *pb.TenantUsage `json:"usage,omitempty"`
}

func listTenants(ctx context.Context, g *globals, reg *registry.Registry) (any, string, error) {
	ts, err := reg.Tenants(ctx)
	if err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	doc := struct {
		Tenants       []tenantRow `json:"tenants"`
		NodesAnswered int         `json:"nodes_answered"`
		NodesFailed   []string    `json:"nodes_failed,omitempty"`
	}{Tenants: []tenantRow{}}
	used := map[string]*pb.TenantUsage{}
	if c, err := g.dial(ctx); err != nil {
		doc.NodesFailed = append(doc.NodesFailed, err.Error())
		fmt.Fprintf(&out, "usage: no node answered: %s\n", brief(err))
	} else {
		usage, answered, failed := c.Usage(ctx)
		c.Close()
		doc.NodesAnswered = answered
		for _, u := range usage {
			used[u.GetTenant()] = u
		}
		for _, ne := range failed {
			doc.NodesFailed = append(doc.NodesFailed, ne.Error())
		}
		g.warn(&out, failed, ": left out of the usage")
	}
	tw := newTable(&out)
	row(tw, "TENANT", "ADMIN", "BYTES", "RESERVE_BYTES", "RESERVATIONS", "LEASES", "MAX_LEASE_TTL",
		"USED", "RESERVED", "OPEN", "SLOT_BYTES", "SLOTS", "HELD", "TOKEN_SHA256")
	for _, t := range ts {
		q := t.Quota
		r := tenantRow{Tenant: t, Usage: used[t.Name]}
		usage := []any{"?", "?", "?", "?", "?", "?"}
		if doc.NodesAnswered > 0 {
			u := r.Usage
			if u == nil {
				u = &pb.TenantUsage{}
			}
			usage = []any{humanBytes(u.GetBytes()), humanBytes(u.GetReservedBytes()), u.GetReservations(),
				humanBytes(u.GetSlotBytes()), u.GetSlots(), u.GetLeases()}
		}
		doc.Tenants = append(doc.Tenants, r)
		row(tw, append(append([]any{t.Name, t.Admin, bound(q.Bytes, true), bound(q.ReserveBytes, true),
			bound(int64(q.Reservations), false), bound(int64(q.Leases), false), boundTTL(q.MaxLeaseTTLMs)}, usage...),
			t.TokenSHA256[:12])...)
	}
	err = tw.Flush()
	return doc, out.String(), err
}

func bound(v int64, bytes bool) string {
	switch {
	case v <= 0:
		return "-"
	case bytes:
		return humanBytes(uint64(v))
	}
	return strconv.FormatInt(v, 10)
}

func boundTTL(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

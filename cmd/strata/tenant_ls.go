package main

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/registry"
)

func newTenantLsCmd(g *globals, f *tenantFlags) *cobra.Command {
	return f.command(g, "ls", "List the tenants in etcd: role, quotas, token hash prefix",
		`List the tenants in etcd, in name order: whether each is an admin, its
per-node quotas (- for no bound) and the first 12 hex digits of its token's
SHA-256 (the token itself is not stored).`, cobra.NoArgs, listTenants)
}

func listTenants(ctx context.Context, reg *registry.Registry, _ []string) (any, string, error) {
	ts, err := reg.Tenants(ctx)
	if err != nil {
		return nil, "", err
	}
	doc := struct {
		Tenants []registry.Tenant `json:"tenants"`
	}{append([]registry.Tenant{}, ts...)}
	var out bytes.Buffer
	tw := newTable(&out)
	row(tw, "TENANT", "ADMIN", "BYTES", "RESERVE_BYTES", "RESERVATIONS", "LEASES", "MAX_LEASE_TTL", "TOKEN_SHA256")
	for _, t := range ts {
		q := t.Quota
		row(tw, t.Name, t.Admin, bound(q.Bytes, true), bound(q.ReserveBytes, true), bound(int64(q.Reservations), false),
			bound(int64(q.Leases), false), boundTTL(q.MaxLeaseTTLMs), t.TokenSHA256[:12])
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

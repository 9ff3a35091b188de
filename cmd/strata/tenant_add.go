package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/registry"
)

// newTenantPutCmd is tenant add (rotate false) or tenant rotate.
func newTenantPutCmd(g *globals, f *tenantFlags, rotate bool) *cobra.Command {
	var (
		token string
		admin bool
		q     quotaFlags
	)
	cmd := f.command(g, "add NAME", "Create a tenant and print its token (shown once: etcd keeps only its hash)",
		`Create a tenant in etcd: a new random token (or --token) whose SHA-256 is
stored, never the token itself, the admin role with --admin, and per-node
quotas. The token is printed once. Every node serves the tenant within
seconds. A tenant that exists is refused: use rotate.`, cobra.ExactArgs(1),
		func(ctx context.Context, reg *registry.Registry, args []string) (any, string, error) {
			return putTenant(ctx, reg, args[0], token, admin, q.quota(), rotate)
		})
	if rotate {
		cmd.Use = "rotate NAME"
		cmd.Short = "Give a tenant a new token (the old one stops working within seconds); sets its role and quotas"
		cmd.Long = `Replace a tenant's token with a new random one (or --token), printed once,
and set its role and quotas to the flags' (zero: no bound). Every node
refuses the old token within seconds, also on open raw connections.`
	}
	cmd.Flags().StringVar(&token, "token", "", "the token to use (default: 32 random bytes, hex)")
	cmd.Flags().BoolVar(&admin, "admin", false, "the admin role: sees and uses every namespace")
	q.add(cmd)
	return cmd
}

// putTenant creates (rotate false) or replaces (rotate true) a tenant; it
// answers the tenant and its token.
func putTenant(ctx context.Context, reg *registry.Registry, name, token string, admin bool, q registry.Quota, rotate bool) (any, string, error) {
	_, err := reg.Tenant(ctx, name)
	switch {
	case err == nil && !rotate:
		return nil, "", fmt.Errorf("tenant %s exists: rotate its token with strata tenant rotate", name)
	case errors.Is(err, registry.ErrNotFound) && rotate:
		return nil, "", fmt.Errorf("no tenant %s: create it with strata tenant add", name)
	case err != nil && !errors.Is(err, registry.ErrNotFound):
		return nil, "", err
	}
	if token == "" {
		token = newToken()
	}
	if err := reg.PutTenant(ctx, registry.Tenant{Name: name, TokenSHA256: tokenHash(token), Admin: admin, Quota: q}); err != nil {
		return nil, "", err
	}
	doc := struct {
		Tenant string `json:"tenant"`
		Token  string `json:"token"`
	}{name, token}
	return doc, fmt.Sprintf("tenant %s\ntoken  %s\n", name, token), nil
}

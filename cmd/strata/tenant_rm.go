package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/registry"
)

func newTenantRmCmd(g *globals, f *tenantFlags) *cobra.Command {
	return f.command(g, "rm NAME", "Remove a tenant: its token is refused on every node within seconds",
		`Remove a tenant from etcd. Every node refuses its token within seconds,
also on open raw and shm connections. Its pages stay until evicted or
dropped (strata ns rm).`, cobra.ExactArgs(1), removeTenant)
}

func removeTenant(ctx context.Context, reg *registry.Registry, args []string) (any, string, error) {
	if err := reg.DeleteTenant(ctx, args[0]); err != nil {
		return nil, "", err
	}
	doc := struct {
		Removed string `json:"removed"`
	}{args[0]}
	return doc, "removed tenant " + args[0] + "\n", nil
}

package main

import "github.com/spf13/cobra"

func newTenantRotateCmd(g *globals, f *tenantFlags) *cobra.Command {
	var (
		token string
		admin bool
		q     quotaFlags
	)
	cmd := &cobra.Command{
		Use:   "rotate NAME",
		Short: "Give a tenant a new token (the old one stops working within seconds); sets its role and quotas",
		Long: `Replace a tenant's token with a new random one (or --token), printed once,
and set its role and quotas to the flags' (zero: no bound). Every node
refuses the old token within seconds, also on open raw connections.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return putTenant(cmd, g, f, args[0], token, admin, q.quota(), true)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the new token (default: 32 random bytes, hex)")
	cmd.Flags().BoolVar(&admin, "admin", false, "the admin role")
	q.add(cmd)
	return cmd
}

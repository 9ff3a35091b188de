package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newTenantRmCmd(g *globals, f *tenantFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a tenant: its token is refused on every node within seconds",
		Long: `Remove a tenant from etcd. Every node refuses its token within seconds,
also on open raw and shm connections. Its pages stay until evicted or
dropped (strata ns rm).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, ctx, cancel, err := f.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer cancel()
			defer reg.Close()
			if err := reg.DeleteTenant(ctx, args[0]); err != nil {
				return err
			}
			doc := struct {
				Removed string `json:"removed"`
			}{args[0]}
			return g.report(cmd, doc, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "removed tenant %s\n", args[0])
				return err
			}, nil)
		},
	}
}

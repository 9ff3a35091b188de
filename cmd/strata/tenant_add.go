package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/registry"
)

func newTenantAddCmd(g *globals, f *tenantFlags) *cobra.Command {
	var (
		token string
		admin bool
		q     quotaFlags
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a tenant and print its token (shown once: etcd keeps only its hash)",
		Long: `Create a tenant in etcd: a new random token (or --token) whose SHA-256 is
stored, never the token itself, the admin role with --admin, and per-node
quotas. The token is printed once. Every node serves the tenant within
seconds. A tenant that exists is refused: use rotate.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return putTenant(cmd, g, f, args[0], token, admin, q.quota(), false)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the token to use (default: 32 random bytes, hex)")
	cmd.Flags().BoolVar(&admin, "admin", false, "the admin role: sees and uses every namespace")
	q.add(cmd)
	return cmd
}

// putTenant creates (rotate false) or replaces (rotate true) a tenant and
// prints its token.
func putTenant(cmd *cobra.Command, g *globals, f *tenantFlags, name, token string, admin bool, q registry.Quota, rotate bool) error {
	reg, ctx, cancel, err := f.open(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer cancel()
	defer reg.Close()
	_, err = reg.Tenant(ctx, name)
	switch {
	case err == nil && !rotate:
		return fmt.Errorf("tenant %s exists: rotate its token with strata tenant rotate", name)
	case errors.Is(err, registry.ErrNotFound) && rotate:
		return fmt.Errorf("no tenant %s: create it with strata tenant add", name)
	case err != nil && !errors.Is(err, registry.ErrNotFound):
		return err
	}
	if token == "" {
		token = newToken()
	}
	if err := reg.PutTenant(ctx, registry.Tenant{Name: name, TokenSHA256: tokenHash(token), Admin: admin, Quota: q}); err != nil {
		return err
	}
	doc := struct {
		Tenant string `json:"tenant"`
		Token  string `json:"token"`
	}{name, token}
	return g.report(cmd, doc, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "tenant %s\ntoken  %s\n", name, token)
		return err
	}, nil)
}

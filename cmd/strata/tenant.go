package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/registry"
)

// The tenant commands manage the tenants in etcd (registry.Tenant): names,
// token hashes, the admin role and per-node quotas. They talk to etcd
// itself (--etcd), not to a node: whoever may write etcd's /strata prefix
// holds the admin role for tenants, so production secures etcd (its own
// TLS and auth). Every node reads the tenants each second, so a change
// holds cluster-wide within seconds; nodes write each change to their
// audit log.

// tenantFlags are what the tenant commands share.
type tenantFlags struct {
	etcd string // --etcd, comma-separated
}

func newTenantCmd(g *globals, getenv func(string) string) *cobra.Command {
	f := &tenantFlags{}
	cmd := newGroupCmd("tenant", "Manage tenants, their tokens and quotas (in etcd)",
		newTenantPutCmd(g, f, false), newTenantLsCmd(g, f), newTenantPutCmd(g, f, true), newTenantRmCmd(g, f))
	def := getenv("STRATA_ETCD")
	if def == "" {
		def = "http://127.0.0.1:2379"
	}
	cmd.PersistentFlags().StringVar(&f.etcd, "etcd", def, "etcd endpoints, comma-separated (env STRATA_ETCD)")
	return cmd
}

// tenantRun is what a tenant subcommand does on the registry: it answers
// the document -o json prints and the text for people.
type tenantRun func(ctx context.Context, reg *registry.Registry, args []string) (doc any, text string, err error)

// command is a tenant subcommand that runs run on the registry.
func (f *tenantFlags) command(g *globals, use, short, long string, args cobra.PositionalArgs, run tenantRun) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Long: long, Args: args,
		RunE: func(cmd *cobra.Command, a []string) error {
			return f.withRegistry(cmd, g, func(ctx context.Context, reg *registry.Registry) (any, string, error) {
				return run(ctx, reg, a)
			})
		}}
}

// withRegistry runs fn on the registry in etcd, within --timeout, then
// prints what fn returned: doc as JSON, or text for people.
func (f *tenantFlags) withRegistry(cmd *cobra.Command, g *globals,
	fn func(ctx context.Context, reg *registry.Registry) (doc any, text string, err error)) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: strings.Split(f.etcd, ","), DialTimeout: g.timeout})
	if err != nil {
		return err
	}
	defer reg.Close()
	doc, text, err := fn(ctx, reg)
	if err != nil {
		return err
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		_, err := io.WriteString(w, text)
		return err
	}, nil)
}

// newToken is 32 random bytes in hex: a bearer token.
func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func tokenHash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// quotaFlags are the quota options of add and rotate.
type quotaFlags struct {
	q        registry.Quota
	leaseTTL time.Duration
}

func (q *quotaFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64Var(&q.q.Bytes, "bytes", 0, "bytes the tenant may hold per node, pages plus open reservations (0: no bound)")
	fl.Int64Var(&q.q.ReserveBytes, "reserve-bytes", 0, "bytes of open reservations per node (0: no bound)")
	fl.IntVar(&q.q.Reservations, "reservations", 0, "open reservations per node (0: no bound)")
	fl.IntVar(&q.q.Leases, "leases", 0, "active leases per node (0: no bound)")
	fl.DurationVar(&q.leaseTTL, "max-lease-ttl", 0, "longest lease TTL (0: the node's)")
}

func (q *quotaFlags) quota() registry.Quota {
	out := q.q
	out.MaxLeaseTTLMs = q.leaseTTL.Milliseconds()
	return out
}

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

// defaultEndpoint is the node address when neither --endpoints nor
// STRATA_ENDPOINTS (nor the older STRATA_ENDPOINT) is set; it is stratad's
// default listen address.
const defaultEndpoint = "127.0.0.1:7070"

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// globals are the flags every command shares.
type globals struct {
	endpointList string   // --endpoints as given: comma-separated
	endpoints    []string // endpointList split, in the order to try them
	token        string
	// ca, cert and key are PEM files for TLS (--ca, --cert, --key; env
	// STRATA_CA, STRATA_CERT, STRATA_KEY); serverName --server-name.
	ca, cert, key, serverName string
	output                    string
	timeout                   time.Duration
}

// json reports whether the command prints JSON rather than a table.
func (g *globals) json() bool { return g.output == outputJSON }

// newRootCmd builds the whole command tree. getenv supplies
// STRATA_ENDPOINTS, STRATA_ENDPOINT and STRATA_TOKEN (os.Getenv in main; a
// map in tests).
func newRootCmd(getenv func(string) string) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "strata",
		Short: "Inspect a strata KV-cache cluster",
		Long: `strata inspects a strata KV-cache cluster through its nodes' Cluster and
Admin APIs: members and their tiers, namespaces and their forks, keys, page
metadata and leases; it also removes namespaces and pages and sets TTLs.

The node asked is the first of --endpoints that answers (a comma-separated
list of gRPC addresses, tried in order; env STRATA_ENDPOINTS, or the older
STRATA_ENDPOINT; default ` + defaultEndpoint + `); it names the other members.
A token (--token, env STRATA_TOKEN) is sent to every node as
"authorization: Bearer <token>". --ca (env STRATA_CA) makes the
connections TLS, checking nodes' certificates against that CA bundle;
--cert and --key (env STRATA_CERT, STRATA_KEY) are the client certificate a
node with --tls-client-auth requires.

ns, keys, lease and transfer ask every alive member and merge the answers; a member
that fails is reported on stderr and left out, and a listing exits 0 unless
every member failed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.finish(cmd, getenv)
		},
	}
	endpoints := cmp.Or(getenv("STRATA_ENDPOINTS"), getenv("STRATA_ENDPOINT"), defaultEndpoint)
	f := root.PersistentFlags()
	f.StringVar(&g.endpointList, "endpoints", endpoints,
		"gRPC addresses of nodes to ask, comma-separated, tried in order until one answers (env STRATA_ENDPOINTS)")
	f.StringVar(&g.endpointList, "endpoint", endpoints, "same as --endpoints (env STRATA_ENDPOINT)")
	f.StringVar(&g.token, "token", "", "bearer token sent to the node (env STRATA_TOKEN)")
	f.StringVar(&g.ca, "ca", getenv("STRATA_CA"), "PEM CA bundle: dial nodes with TLS, their certificates checked against it (env STRATA_CA)")
	f.StringVar(&g.cert, "cert", getenv("STRATA_CERT"), "PEM client certificate for nodes that verify clients (env STRATA_CERT)")
	f.StringVar(&g.key, "key", getenv("STRATA_KEY"), "PEM key of --cert (env STRATA_KEY)")
	f.StringVar(&g.serverName, "server-name", "", "name the nodes' certificates must carry (default the host dialed)")
	f.StringVarP(&g.output, "output", "o", outputTable, "output format: table or json")
	f.DurationVar(&g.timeout, "timeout", 5*time.Second, "deadline of each call to a node")
	root.AddCommand(newNSCmd(g), newKeysCmd(g), newNodeCmd(g), newClusterCmd(g), newLeaseCmd(g), newTenantCmd(g, getenv),
		newTransferCmd(g))
	return root
}

// finish completes and checks the global flags once they are parsed. The
// token comes from the environment here rather than as a flag default, so
// --help never prints it.
func (g *globals) finish(cmd *cobra.Command, getenv func(string) string) error {
	if !cmd.Flags().Changed("token") {
		g.token = getenv("STRATA_TOKEN")
	}
	if g.output != outputTable && g.output != outputJSON {
		return fmt.Errorf("unknown output format %q: want %s or %s", g.output, outputTable, outputJSON)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", g.timeout)
	}
	g.endpoints = splitEndpoints(g.endpointList)
	if len(g.endpoints) == 0 {
		return fmt.Errorf("--endpoints is empty: give a node's gRPC address, e.g. %s", defaultEndpoint)
	}
	return nil
}

// dial connects to the cluster through the first of --endpoints that
// answers, with the token and --timeout; the caller closes it.
func (g *globals) dial(ctx context.Context) (*admin.Cluster, error) {
	c, err := admin.Dial(ctx, g.endpoints, admin.Options{Token: g.token, Timeout: g.timeout,
		CA: g.ca, Cert: g.cert, Key: g.key, ServerName: g.serverName})
	return c, g.explain(err)
}

// onCluster is a command's RunE that dials the cluster, runs do on it
// and closes it.
func (g *globals) onCluster(do func(cmd *cobra.Command, c *admin.Cluster, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := g.dial(cmd.Context())
		if err != nil {
			return err
		}
		defer c.Close()
		return do(cmd, c, args)
	}
}

// namespaces lists the namespaces of tenant ("": all the token may see)
// on c, summed over the members; a member that fails is reported on
// stderr (see settle).
func (g *globals) namespaces(cmd *cobra.Command, c *admin.Cluster, tenant string) ([]*admin.Namespace, error) {
	nss, failed, err := c.Namespaces(cmd.Context(), tenant)
	return nss, g.settle(cmd.ErrOrStderr(), failed, err)
}

// splitEndpoints splits a comma-separated list, dropping blanks and
// repeats.
func splitEndpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// newGroupCmd is a command that only holds subcommands: alone it prints
// its help, and an unknown subcommand is an error rather than more help.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(subs...)
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

type nsDrainOptions struct {
	tenant, model, revision, keep string
	ttl                           time.Duration
}

func newNSDrainCmd(g *globals) *cobra.Command {
	var o nsDrainOptions
	var ttl string
	cmd := &cobra.Command{
		Use:   "drain --model M (--revision R | --keep-revision R) --ttl D",
		Short: "Retire a model revision's namespaces: their pages go once unused for a while",
		Long: `Retire the namespaces of a model revision after a rollout: set the idle
TTL (as ns ttl does) on every namespace of the model at that revision,
whatever its fork (TP size, page size, dtype, engine). Pages no lookup uses
for longer than the TTL are removed, so engines still on the old revision
keep their hits while they drain and the memory returns once they stop.

--revision R drains revision R; --keep-revision R drains every revision of
the model but R (the one rolled out). --tenant limits it to one tenant.
--ttl 0 clears the TTL again. Namespaces stay registered: remove one for
good with ns rm.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.ttl, err = parseTTL(ttl); err != nil {
				return err
			}
			if o.model == "" || (o.revision == "") == (o.keep == "") {
				return errors.New("ns drain needs --model and exactly one of --revision or --keep-revision")
			}
			return g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
				return runNSDrain(cmd, g, c, o)
			})(cmd, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "the model (as ns ls prints it)")
	f.StringVar(&o.revision, "revision", "", "drain this revision")
	f.StringVar(&o.keep, "keep-revision", "", "drain every revision but this one")
	f.StringVar(&o.tenant, "tenant", "", "only this tenant's namespaces")
	f.StringVar(&ttl, "ttl", "", "idle TTL to set, e.g. 10m (0 clears it)")
	cmd.MarkFlagRequired("ttl")
	return cmd
}

// nsDrainJSON is `ns drain`.
type nsDrainJSON struct {
	NodeID     string          `json:"node_id"` // the node asked
	TTLMs      uint64          `json:"ttl_ms"`
	Namespaces []drainedNSJSON `json:"namespaces"`
}

// drainedNSJSON is one namespace that ns drain set the TTL of.
type drainedNSJSON struct {
	ID       string `json:"id"`
	Tenant   string `json:"tenant"`
	Revision string `json:"revision"`
	Engine   string `json:"engine"`
	TPSize   uint32 `json:"tp_size"`
	Pages    uint64 `json:"pages"`
	Nodes    int    `json:"nodes"` // nodes that set the TTL
}

// selects reports whether ns drain applies to a namespace.
func (o nsDrainOptions) selects(n *admin.Namespace) bool {
	d := n.Info.GetDescriptor_()
	if d.GetModel() != o.model || (o.tenant != "" && d.GetTenant() != o.tenant) {
		return false
	}
	if o.revision != "" {
		return d.GetModelRevision() == o.revision
	}
	return d.GetModelRevision() != o.keep
}

func runNSDrain(cmd *cobra.Command, g *globals, c *admin.Cluster, o nsDrainOptions) error {
	nss, err := g.namespaces(cmd, c, o.tenant)
	if err != nil {
		return err
	}
	doc := nsDrainJSON{NodeID: c.NodeID(), TTLMs: uint64(o.ttl.Milliseconds()), Namespaces: []drainedNSJSON{}}
	var failed error
	for _, n := range nss {
		if !o.selects(n) {
			continue
		}
		found, _, err := c.Namespace(cmd.Context(), hexOf(n.Info.GetId()))
		if err == nil {
			var rs []admin.Reply[*pb.SetNamespaceTTLResponse]
			rs, err = setTTL(cmd, c, found, o.ttl)
			d := n.Info.GetDescriptor_()
			doc.Namespaces = append(doc.Namespaces, drainedNSJSON{ID: hexOf(n.Info.GetId()), Tenant: d.GetTenant(),
				Revision: d.GetModelRevision(), Engine: d.GetEngine(), TPSize: max(d.GetTpSize(), 1),
				Pages: n.Info.GetPages(), Nodes: len(rs)})
		}
		if err != nil && failed == nil {
			failed = fmt.Errorf("namespace %s: %w", shortHex(n.Info.GetId(), shortIDHex),
				g.settleAll(cmd.ErrOrStderr(), err, "the TTL was not set"))
		}
	}
	if len(doc.Namespaces) == 0 && failed == nil {
		return fmt.Errorf("no namespace of model %q matches (list them with: strata ns ls)", o.model)
	}
	return g.report(cmd, doc, func(w io.Writer) error { return writeNSDrain(w, doc) }, failed)
}

// setTTL sets ttl on found and keeps the answers of the nodes that set it.
func setTTL(cmd *cobra.Command, c *admin.Cluster, found *admin.Found, ttl time.Duration) ([]admin.Reply[*pb.SetNamespaceTTLResponse], error) {
	rs, err := c.SetTTL(cmd.Context(), found, ttl)
	ok := rs[:0]
	for _, r := range rs {
		if r.Err == nil {
			ok = append(ok, r)
		}
	}
	return ok, err
}

// writeNSDrain prints one row per namespace drained, then a summary.
func writeNSDrain(w io.Writer, doc nsDrainJSON) error {
	tw := newTable(w)
	row(tw, "ID", "TENANT", "REVISION", "ENGINE", "TP", "PAGES", "NODES")
	for _, n := range doc.Namespaces {
		row(tw, n.ID, n.Tenant, n.Revision, n.Engine, n.TPSize, n.Pages, n.Nodes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if doc.TTLMs == 0 {
		_, err = fmt.Fprintf(w, "idle TTL cleared on %d namespace(s)\n", len(doc.Namespaces))
	} else {
		_, err = fmt.Fprintf(w, "%d namespace(s) draining: pages unused for more than %s are removed\n",
			len(doc.Namespaces), formatTTL(doc.TTLMs))
	}
	return err
}

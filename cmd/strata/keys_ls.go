package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

type keysLsOptions struct {
	limit int
	after string
	wide  bool
}

func newKeysLsCmd(g *globals) *cobra.Command {
	var o keysLsOptions
	cmd := &cobra.Command{
		Use:   "ls <ns-id-or-prefix>",
		Short: "List a namespace's page keys in key order",
		Long: `List the page keys of one namespace in key order, with their page
metadata. The namespace is named by its ID or a unique prefix of it.

Every alive member is asked and the listings are merged in key order; in
a cluster of more than one member the NODE column says which node holds
each key, and a key held by several nodes has one row per node. A member
that fails is reported on stderr and its keys are missing.

--limit counts rows, but the rows of one key are never split: a listing
may run over by the other copies of its last key, so that --after that
key loses none.

When --limit stops the listing early, the table is followed (on stderr) by
the --after value that continues it; -o json carries it as next_after_key.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysLs(cmd, g, args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.limit, "limit", 100, "most keys to list; 0 lists them all")
	f.StringVar(&o.after, "after", "", "list keys after this one (64 hex digits)")
	f.BoolVar(&o.wide, "wide", false, "print full keys and checksums, and the parent key")
	return cmd
}

func runKeysLs(cmd *cobra.Command, g *globals, nsArg string, o keysLsOptions) error {
	if o.limit < 0 {
		return fmt.Errorf("--limit must not be negative, got %d", o.limit)
	}
	if _, err := parseNSRef(nsArg); err != nil {
		return err
	}
	var after []byte
	if o.after != "" {
		var err error
		if after, err = parseKey(o.after); err != nil {
			return fmt.Errorf("--after: %w", err)
		}
	}
	c, ns, _, err := g.openNamespace(cmd, nsArg)
	if err != nil {
		return err
	}
	defer c.Close()
	rows, next, failed, err := c.Keys(cmd.Context(), ns, after, o.limit)
	if err := g.settle(cmd.ErrOrStderr(), failed, err); err != nil {
		return err
	}
	doc := struct {
		NodeID       string    `json:"node_id"` // the node asked
		NamespaceID  string    `json:"namespace_id"`
		Keys         []keyJSON `json:"keys"`
		NextAfterKey string    `json:"next_after_key"` // "" when the listing is complete
	}{NodeID: c.NodeID(), NamespaceID: hexOf(ns.ID), Keys: []keyJSON{}, NextAfterKey: hexOf(next)}
	for _, r := range rows {
		doc.Keys = append(doc.Keys, keyView(r))
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		if err := writeKeysTable(w, rows, o.wide, c.Multi(), time.Now()); err != nil {
			return err
		}
		if len(next) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "more keys may follow: --after %s\n", hexOf(next))
		}
		return nil
	}, nil)
}

// writeKeysTable prints one row per key; nodes adds the NODE column.
func writeKeysTable(w io.Writer, rows []admin.KeyRow, wide, nodes bool, now time.Time) error {
	tw := newTable(w)
	head := []any{"KEY"}
	if nodes {
		head = append(head, "NODE")
	}
	head = append(head, "DEPTH", "SIZE", "TIER", "CHECKSUM", "LEASES", "HITS", "AGE")
	if wide {
		head = append(head, "PARENT")
	}
	row(tw, head...)
	for _, r := range rows {
		k := r.Info
		key, sum := shortHex(k.GetKey(), shortKeyHex), shortHex(k.GetChecksum(), shortKeyHex)
		if wide {
			key, sum = orNone(hexOf(k.GetKey())), orNone(hexOf(k.GetChecksum()))
		}
		cells := []any{key}
		if nodes {
			cells = append(cells, orNone(r.Node))
		}
		cells = append(cells, k.GetDepth(), humanBytes(k.GetSize()), tierName(k.GetTier()), sum,
			k.GetLeases(), k.GetHits(), ageOf(k.GetCreatedUnixMs(), now))
		if wide {
			cells = append(cells, orNone(hexOf(k.GetParentKey())))
		}
		row(tw, cells...)
	}
	return tw.Flush()
}

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// listPage is how many keys one ListKeys call asks for.
const listPage = 1000

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
	ref, err := parseNSRef(nsArg)
	if err != nil {
		return err
	}
	var after []byte
	if o.after != "" {
		if after, err = parseKey(o.after); err != nil {
			return fmt.Errorf("--after: %w", err)
		}
	}
	f, ns, err := g.openNamespace(cmd, ref)
	if err != nil {
		return err
	}
	defer f.Close()
	rs := gather(cmd.Context(), ns.members(), func(ctx context.Context, c *conn) (nodeKeys, error) {
		keys, next, err := listKeys(ctx, c, ns.id, after, o.limit)
		return nodeKeys{keys: keys, more: len(next) > 0}, err
	})
	if err := settle(cmd.ErrOrStderr(), rs); err != nil {
		return err
	}
	var lists []nodeKeys
	for _, r := range answered(rs) {
		r.val.node = r.GetNodeId()
		lists = append(lists, r.val)
	}
	rows, next := mergeKeys(lists, o.limit)
	if g.json() {
		doc := struct {
			NodeID       string    `json:"node_id"` // the node asked
			NamespaceID  string    `json:"namespace_id"`
			Keys         []keyJSON `json:"keys"`
			NextAfterKey string    `json:"next_after_key"` // "" when the listing is complete
		}{NodeID: f.view.GetNodeId(), NamespaceID: hexOf(ns.id), Keys: []keyJSON{}, NextAfterKey: hexOf(next)}
		for _, r := range rows {
			doc.Keys = append(doc.Keys, keyView(r.node, r.info))
		}
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	if err := writeKeysTable(cmd.OutOrStdout(), rows, o.wide, f.multi(), time.Now()); err != nil {
		return err
	}
	if len(next) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "more keys may follow: --after %s\n", hexOf(next))
	}
	return nil
}

// listKeys pages through ListKeys from after until limit keys (0: all).
// next is where a further listing would continue, empty when done.
func listKeys(ctx context.Context, c *conn, id, after []byte, limit int) (keys []*pb.KeyInfo, next []byte, err error) {
	for {
		want := listPage
		if limit > 0 {
			want = min(want, limit-len(keys))
		}
		resp, err := invoke(ctx, c, c.admin.ListKeys,
			&pb.ListKeysRequest{NamespaceId: id, AfterKey: after, Limit: uint32(want)})
		if err != nil {
			return nil, nil, err
		}
		got := resp.GetKeys()
		if len(got) > want {
			got = got[:want]
		}
		keys = append(keys, got...)
		next = resp.GetNextAfterKey()
		if len(next) == 0 || len(got) == 0 {
			return keys, nil, nil
		}
		if limit > 0 && len(keys) >= limit {
			return keys, keys[len(keys)-1].GetKey(), nil
		}
		after = next
	}
}

// writeKeysTable prints one row per key; nodes adds the NODE column.
func writeKeysTable(w io.Writer, rows []keyRow, wide, nodes bool, now time.Time) error {
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
		k := r.info
		key, sum := shortHex(k.GetKey(), shortKeyHex), shortHex(k.GetChecksum(), shortKeyHex)
		if wide {
			key, sum = orNone(hexOf(k.GetKey())), orNone(hexOf(k.GetChecksum()))
		}
		cells := []any{key}
		if nodes {
			cells = append(cells, orNone(r.node))
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

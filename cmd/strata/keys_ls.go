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
	var after []byte
	if o.after != "" {
		var err error
		if after, err = parseKey(o.after); err != nil {
			return fmt.Errorf("--after: %w", err)
		}
	}
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ns, err := resolveNamespace(cmd.Context(), c, nsArg)
	if err != nil {
		return err
	}
	id := ns.GetNamespace().GetId()
	keys, next, err := listKeys(cmd.Context(), c, id, after, o.limit)
	if err != nil {
		return err
	}
	if g.json() {
		doc := struct {
			NodeID       string    `json:"node_id"`
			NamespaceID  string    `json:"namespace_id"`
			Keys         []keyJSON `json:"keys"`
			NextAfterKey string    `json:"next_after_key"` // "" when the listing is complete
		}{NodeID: ns.GetNodeId(), NamespaceID: hexOf(id), Keys: []keyJSON{}, NextAfterKey: hexOf(next)}
		for _, k := range keys {
			doc.Keys = append(doc.Keys, keyView(k))
		}
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	if err := writeKeysTable(cmd.OutOrStdout(), keys, o.wide, time.Now()); err != nil {
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

func writeKeysTable(w io.Writer, keys []*pb.KeyInfo, wide bool, now time.Time) error {
	tw := newTable(w)
	head := []any{"KEY", "DEPTH", "SIZE", "TIER", "CHECKSUM", "LEASES", "HITS", "AGE"}
	if wide {
		head = append(head, "PARENT")
	}
	row(tw, head...)
	for _, k := range keys {
		key, sum := shortHex(k.GetKey(), shortKeyHex), shortHex(k.GetChecksum(), shortKeyHex)
		if wide {
			key, sum = orNone(hexOf(k.GetKey())), orNone(hexOf(k.GetChecksum()))
		}
		cells := []any{key, k.GetDepth(), humanBytes(k.GetSize()), tierName(k.GetTier()), sum,
			k.GetLeases(), k.GetHits(), ageOf(k.GetCreatedUnixMs(), now)}
		if wide {
			cells = append(cells, orNone(hexOf(k.GetParentKey())))
		}
		row(tw, cells...)
	}
	return tw.Flush()
}

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newKeysStatCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stat <ns-id-or-prefix> <key-hex>...",
		Short: "Show everything the cluster knows about some page keys",
		Long: `Show one block per key with its page metadata. Keys are full 64-digit
hex. Every alive member is asked; in a cluster of more than one member
each block names the node that holds the key, and a key held by several
nodes has one block per node.

A key no node holds prints "status: absent"; the command then exits with
status 1 after printing every block (0 only when all are found). A member
that fails is reported on stderr, and a key only it holds shows as absent.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysStat(cmd, g, args[0], args[1:])
		},
	}
}

// statEntry is one requested key in -o json. An absent key has only key,
// found and empty nodes and copies; a present one also has the fields of
// its first copy (in node order).
type statEntry struct {
	Key    string    `json:"key"`
	Found  bool      `json:"found"`
	Nodes  []string  `json:"nodes"`  // the nodes that hold it
	Copies []keyJSON `json:"copies"` // each node's copy
	*keyJSON
}

func runKeysStat(cmd *cobra.Command, g *globals, nsArg string, keyArgs []string) error {
	ref, err := parseNSRef(nsArg)
	if err != nil {
		return err
	}
	keys := make([][]byte, len(keyArgs))
	for i, a := range keyArgs {
		if keys[i], err = parseKey(a); err != nil {
			return err
		}
	}
	f, ns, err := g.openNamespace(cmd, ref)
	if err != nil {
		return err
	}
	defer f.Close()
	rs := gather(cmd.Context(), ns.members(), func(ctx context.Context, c *conn) ([]*pb.KeyInfo, error) {
		resp, err := invoke(ctx, c, c.admin.StatKeys, &pb.StatKeysRequest{NamespaceId: ns.id, Keys: keys})
		if err == nil && len(resp.GetKeys()) != len(keys) {
			err = fmt.Errorf("the node at %s answered %d keys for %d asked", c.endpoint, len(resp.GetKeys()), len(keys))
		}
		return resp.GetKeys(), err
	})
	if err := settle(cmd.ErrOrStderr(), rs); err != nil {
		return err
	}
	entries := make([]statEntry, len(keys))
	absent := 0
	for i := range keys {
		e := statEntry{Key: hexOf(keys[i]), Nodes: []string{}, Copies: []keyJSON{}}
		for _, r := range answered(rs) {
			if info := r.val[i]; len(info.GetKey()) > 0 {
				e.Nodes = append(e.Nodes, r.GetNodeId())
				e.Copies = append(e.Copies, keyView(r.GetNodeId(), info))
			}
		}
		if e.Found = len(e.Copies) > 0; e.Found {
			e.keyJSON = &e.Copies[0]
		} else {
			absent++
		}
		entries[i] = e
	}
	if g.json() {
		err = writeJSON(cmd.OutOrStdout(), struct {
			NodeID      string      `json:"node_id"` // the node asked
			NamespaceID string      `json:"namespace_id"`
			Keys        []statEntry `json:"keys"`
		}{f.view.GetNodeId(), hexOf(ns.id), entries})
	} else {
		err = writeKeyBlocks(cmd.OutOrStdout(), entries, f.multi(), time.Now())
	}
	if err != nil {
		return err
	}
	if absent > 0 {
		return fmt.Errorf("%d of %d keys absent", absent, len(keys))
	}
	return nil
}

// writeKeyBlocks prints one "name: value" block per copy of each key (one
// for an absent key), blank-line apart; nodes adds the node line.
func writeKeyBlocks(w io.Writer, entries []statEntry, nodes bool, now time.Time) error {
	tw := newTable(w)
	first := true
	block := func(key string) {
		if !first {
			fmt.Fprintln(tw)
		}
		first = false
		row(tw, "key:", key)
	}
	for _, e := range entries {
		if !e.Found {
			block(e.Key)
			row(tw, "status:", "absent")
			continue
		}
		for _, k := range e.Copies {
			block(e.Key)
			if nodes {
				row(tw, "node:", k.Node)
			}
			row(tw, "status:", "present")
			row(tw, "parent:", orNone(k.ParentKey))
			row(tw, "depth:", k.Depth)
			row(tw, "size:", fmt.Sprintf("%d (%s)", k.Size, humanBytes(k.Size)))
			row(tw, "checksum:", orNone(k.Checksum))
			row(tw, "tier:", k.Tier)
			row(tw, "created:", formatTime(k.CreatedUnixMs, now))
			row(tw, "last access:", formatTime(k.LastAccessUnixMs, now))
			row(tw, "leases:", k.Leases)
			row(tw, "hits:", k.Hits)
			row(tw, "resident children:", k.ResidentChildren)
			row(tw, "orphan:", k.Orphan)
		}
	}
	return tw.Flush()
}

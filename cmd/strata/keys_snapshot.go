package main

import (
	"cmp"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newKeysSnapshotCmd(g *globals) *cobra.Command {
	var node string
	cmd := &cobra.Command{
		Use:   "snapshot <ns-id-or-prefix>",
		Short: "Dump a namespace's keys on one node at a point of its KV event stream",
		Long: `Dump the page keys (key, parent, tier) one node holds for a namespace
at one point of its tenant's KV event stream (Admin.SnapshotKeys;
docs/design.md §15), and the stream's sequence number after it
(next_seq), the node's incarnation and the namespace's topic. A consumer
that applies the dump and then the stream from next_seq misses nothing
and counts nothing twice. The node copies the namespace a shard at a time
(the keys come in key order within each shard's run) and streams them as
it copies.

--node names the member (default the one asked); the namespace must
publish a stream there (stratad --events).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysSnapshot(cmd, g, args[0], node)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node ID of the member to dump (default the one asked)")
	return cmd
}

func runKeysSnapshot(cmd *cobra.Command, g *globals, nsArg, node string) error {
	c, ns, _, err := g.openNamespace(cmd, nsArg)
	if err != nil {
		return err
	}
	defer c.Close()
	node = cmp.Or(node, c.NodeID())
	var m *admin.Member
	for _, x := range ns.Members() {
		if x.GetNodeId() == node {
			m = x
		}
	}
	if m == nil {
		return fmt.Errorf("node %s does not know namespace %s", node, shortHex(ns.ID, shortIDHex))
	}
	type keyJSON struct {
		Key    string `json:"key"`
		Parent string `json:"parent,omitempty"`
		Tier   string `json:"tier"`
	}
	doc := struct {
		NodeID      string    `json:"node_id"`
		NamespaceID string    `json:"namespace_id"`
		NextSeq     uint64    `json:"next_seq"`
		Incarnation uint64    `json:"incarnation"`
		Topic       string    `json:"topic"`
		Total       uint64    `json:"total"`
		Keys        []keyJSON `json:"keys"`
	}{NodeID: node, NamespaceID: hexOf(ns.ID), Keys: []keyJSON{}}
	err = c.Snapshot(cmd.Context(), ns, m, 0, func(r *pb.SnapshotKeysResponse) error {
		doc.NextSeq, doc.Incarnation, doc.Topic, doc.Total = r.GetNextSeq(), r.GetIncarnation(), r.GetTopic(), r.GetTotal()
		for _, k := range r.GetKeys() {
			doc.Keys = append(doc.Keys, keyJSON{Key: hexOf(k.GetKey()), Parent: hexOf(k.GetParentKey()), Tier: tierName(k.GetTier())})
		}
		return nil
	})
	if err != nil {
		return g.explain(err)
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		fmt.Fprintf(w, "node %s, incarnation %d, next_seq %d, topic %s: %d keys\n", doc.NodeID, doc.Incarnation,
			doc.NextSeq, doc.Topic, len(doc.Keys))
		tw := newTable(w)
		fmt.Fprintln(tw, "KEY\tPARENT\tTIER")
		for _, k := range doc.Keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Key, k.Parent, k.Tier)
		}
		return tw.Flush()
	}, nil)
}

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newKeysStatCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stat <ns-id-or-prefix> <key-hex>...",
		Short: "Show everything the node knows about some page keys",
		Long: `Show one block per key with its page metadata. Keys are full 64-digit
hex. A key the node does not hold prints "status: absent"; the command then
exits with status 1 after printing every block (0 only when all are found).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysStat(cmd, g, args[0], args[1:])
		},
	}
}

// statEntry is one requested key in -o json; an absent key has only key
// and found.
type statEntry struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	*keyJSON
}

func runKeysStat(cmd *cobra.Command, g *globals, nsArg string, keyArgs []string) error {
	keys := make([][]byte, len(keyArgs))
	for i, a := range keyArgs {
		var err error
		if keys[i], err = parseKey(a); err != nil {
			return err
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
	resp, err := invoke(cmd.Context(), c, c.admin.StatKeys, &pb.StatKeysRequest{NamespaceId: id, Keys: keys})
	if err != nil {
		return err
	}
	infos := resp.GetKeys()
	if len(infos) != len(keys) {
		return fmt.Errorf("the node at %s answered %d keys for %d asked", c.endpoint, len(infos), len(keys))
	}
	entries := make([]statEntry, len(keys))
	absent := 0
	for i, info := range infos {
		entries[i] = statEntry{Key: hexOf(keys[i]), Found: len(info.GetKey()) > 0}
		if entries[i].Found {
			v := keyView(info)
			entries[i].keyJSON = &v
		} else {
			absent++
		}
	}
	if g.json() {
		err = writeJSON(cmd.OutOrStdout(), struct {
			NodeID      string      `json:"node_id"`
			NamespaceID string      `json:"namespace_id"`
			Keys        []statEntry `json:"keys"`
		}{resp.GetNodeId(), hexOf(id), entries})
	} else {
		err = writeKeyBlocks(cmd.OutOrStdout(), entries, infos, time.Now())
	}
	if err != nil {
		return err
	}
	if absent > 0 {
		return fmt.Errorf("%d of %d keys absent", absent, len(keys))
	}
	return nil
}

// writeKeyBlocks prints one "name: value" block per key, blank-line apart.
func writeKeyBlocks(w io.Writer, entries []statEntry, infos []*pb.KeyInfo, now time.Time) error {
	tw := newTable(w)
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		row(tw, "key:", e.Key)
		if !e.Found {
			row(tw, "status:", "absent")
			continue
		}
		k := infos[i]
		row(tw, "status:", "present")
		row(tw, "parent:", orNone(hexOf(k.GetParentKey())))
		row(tw, "depth:", k.GetDepth())
		row(tw, "size:", fmt.Sprintf("%d (%s)", k.GetSize(), humanBytes(k.GetSize())))
		row(tw, "checksum:", orNone(hexOf(k.GetChecksum())))
		row(tw, "tier:", tierName(k.GetTier()))
		row(tw, "created:", formatTime(k.GetCreatedUnixMs(), now))
		row(tw, "last access:", formatTime(k.GetLastAccessUnixMs(), now))
		row(tw, "leases:", k.GetLeases())
		row(tw, "hits:", k.GetHits())
		row(tw, "resident children:", k.GetResidentChildren())
	}
	return tw.Flush()
}

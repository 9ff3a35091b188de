package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNSShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show <id-or-prefix>",
		Short: "Show a namespace's whole descriptor and its statistics",
		Long: `Show every descriptor field of one namespace and its statistics. The
namespace is named by its ID or any unique prefix of it, in hex.

Every alive member is asked; the statistics and the tiers are sums over
them, and in a cluster of more than one member a nodes section gives each
node's share. A member that fails is reported on stderr and left out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, _, err := g.openNamespace(cmd, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			t := ns.Total
			doc := struct {
				NodeID    string        `json:"node_id"` // the node asked
				Namespace namespaceJSON `json:"namespace"`
				PerNode   []nsNodeJSON  `json:"per_node"` // each node that knows the namespace
			}{c.NodeID(), namespaceView(t), []nsNodeJSON{}}
			for _, p := range t.Parts {
				doc.PerNode = append(doc.PerNode, nsNodeView(p))
			}
			return g.report(cmd, doc, func(w io.Writer) error { return writeNSShow(w, t, c.Multi(), time.Now()) }, nil)
		},
	}
}

// writeNSShow prints "name: value" lines: the namespace, its descriptor,
// its statistics, its tiers and, with perNode, each node's share.
func writeNSShow(w io.Writer, t *admin.Namespace, perNode bool, now time.Time) error {
	n := t.Info
	tw := newTable(w)
	row(tw, "id:", hexOf(n.GetId()))
	if !perNode {
		row(tw, "node:", orNone(t.Parts[0].Node))
	}
	row(tw, "created:", formatTime(n.GetCreatedUnixMs(), now))
	fmt.Fprintln(tw, "descriptor:")
	for _, f := range descriptorFields(n.GetDescriptor_()) {
		row(tw, "  "+f[0]+":", f[1])
	}
	fmt.Fprintln(tw, "stats:")
	row(tw, "  page_bytes:", fmt.Sprintf("%d (%s)", n.GetPageBytes(), humanBytes(n.GetPageBytes())))
	row(tw, "  pages:", n.GetPages())
	row(tw, "  bytes:", fmt.Sprintf("%d (%s)", n.GetBytes(), humanBytes(n.GetBytes())))
	row(tw, "  lookups:", n.GetLookups())
	row(tw, "  lookup_keys:", n.GetLookupKeys())
	row(tw, "  hit_keys:", n.GetHitKeys())
	row(tw, "  hit_rate:", formatHitRate(n))
	row(tw, "  leases_active:", n.GetLeasesActive())
	row(tw, "  ttl:", formatTTL(n.GetTtlMs()))
	row(tw, "  expired_pages:", n.GetExpiredPages())
	if len(n.GetTiers()) > 0 {
		fmt.Fprintln(tw, "tiers:")
		for _, ts := range n.GetTiers() {
			row(tw, "  "+tierName(ts.GetTier())+":", nsShare(ts.GetPages(), ts.GetUsedBytes()))
		}
	}
	if perNode {
		fmt.Fprintln(tw, "nodes:")
		for _, p := range t.Parts {
			row(tw, "  "+p.Node+":", nsShare(p.Info.GetPages(), p.Info.GetBytes())+", hit rate "+formatHitRate(p.Info))
		}
	}
	return tw.Flush()
}

// nsShare is "3 pages, 49152 bytes (48KiB)".
func nsShare(pages, bytes uint64) string {
	return fmt.Sprintf("%d pages, %d bytes (%s)", pages, bytes, humanBytes(bytes))
}

// descriptorFields lists every descriptor field as name and value, named
// as in the proto and in -o json.
func descriptorFields(d *pb.Descriptor) [][2]string {
	num := func(v uint32) string { return fmt.Sprint(v) }
	declared := "0 (derived from the geometry)"
	if b := d.GetPageBytes(); b != 0 {
		declared = fmt.Sprintf("%d (%s)", b, humanBytes(b))
	}
	c := d.GetCompute()
	return [][2]string{
		{"tenant", orNone(d.GetTenant())},
		{"model", orNone(d.GetModel())},
		{"model_revision", orNone(d.GetModelRevision())},
		{"adapter", orNone(d.GetAdapter())},
		{"adapter_revision", orNone(d.GetAdapterRevision())},
		{"tokenizer_revision", orNone(d.GetTokenizerRevision())},
		{"engine", orNone(d.GetEngine())},
		{"kv_format_version", num(d.GetKvFormatVersion())},
		{"dtype", orNone(d.GetDtype())},
		{"kv_dtype", orNone(d.GetKvDtype())},
		{"layout", orNone(d.GetLayout())},
		{"page_tokens", num(d.GetPageTokens())},
		{"num_layers", num(d.GetNumLayers())},
		{"num_kv_heads", num(d.GetNumKvHeads())},
		{"head_dim", num(d.GetHeadDim())},
		{"mla_latent_dim", num(d.GetMlaLatentDim())},
		{"tp_size", num(d.GetTpSize())},
		{"tp_rank", num(d.GetTpRank())},
		{"pp_size", num(d.GetPpSize())},
		{"pp_rank", num(d.GetPpRank())},
		{"cp_size", num(d.GetCpSize())},
		{"cp_rank", num(d.GetCpRank())},
		{"quantization", orNone(d.GetQuantization())},
		{"extra", formatExtra(d.GetExtra())},
		{"page_bytes", declared},
		{"page_format", orNone(d.GetPageFormat())},
		{"checksum", checksumName(d.GetChecksum())},
		{"key_format", keyFormatName(d.GetKeyFormat())},
		{"compute.params", fmt.Sprint(c.GetParams())},
		{"compute.attention_heads", num(c.GetAttentionHeads())},
		{"compute.attention_head_dim", num(c.GetAttentionHeadDim())},
	}
}

// formatExtra is "k=v, k2=v2" in key order, or none.
func formatExtra(m map[string]string) string {
	if len(m) == 0 {
		return none
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

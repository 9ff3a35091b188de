// Command strata-sim replays a Mooncake-format trace over simulated strata
// nodes and reports, for each cache size and eviction policy, the fraction
// of prefill FLOPs saved, the token hit rate and the bytes held by orphaned
// pages. Strata's own policies run the shipped code: each node is a real
// store.Store.
//
//	go run ./cmd/strata-sim --trace ../shared/data/mooncake_synthetic_trace.jsonl \
//		--capacity-ratios 1:1:2:4 --placements 5
//
// # Model
//
// --trace gen:conversation[:SEED] and gen:agent[:SEED] generate a workload
// in the same format instead of reading one (workload.go: multi-turn chat
// sessions with think times, documents read once and a few hot system
// prompts; tool-using agents with long system prompts, growing contexts,
// forks and retries), from the seed (default 1); --write-trace keeps a
// copy. gen:recency and gen:scan (workload_disagree.go) are workloads whose
// best fixed half-life is far from the synthetic trace's: chat whose reuse
// follows recency alone, and long scans over a small hot set.
//
// Each trace block (hash id, 512 tokens; the last block of a prompt may be
// partial) is a page. Its placement key is SHA-256(parent key || LE-uint64
// hash id), and its owner the capacity-weighted rendezvous winner (package
// placement); with --placements k the node IDs, hence the owners, change k
// times and figures are averaged. Cache size is a percentage of the KV
// bytes of all distinct blocks, split over the nodes by --capacity-ratios;
// every node holds as many whole pages (tokens of a full page × KV bytes
// per token) as fit, whatever the block's tokens, as a store does. Prefill
// FLOPs saved are F(hit tokens) out of F(input tokens), F(s) = 2·N·s +
// 2·L·h·d_h·s², counting a partial last block's own tokens.
//
// # Strata's policies: real stores (stores.go)
//
// lru-leaf and the ours-* policies run one store.Store per node over a
// heap tier (tiers.Heap) of the node's capacity in pages: the store's
// leaf-first links, evictions, orphan rule, value and child hints and
// admission decide, and the tier reports every page that leaves. Pages
// hold 64 bytes rather than their KV (6.5 TiB for the trace): all pages
// have one size, so every worth, cutoff and capacity scales alike and no
// decision changes. A request does what an engine and a cluster client do:
// look up every page on its holder (where the client last saw it, else its
// owner) under a lease; report the pages found past the first miss as
// orphans (MarkOrphans); put the pages from the miss on that are not
// resident, one Reserve per node, a refused page on its second placement
// candidate, and delete the pages stored past one that no candidate took
// (the put is parallel per node, so they were stored all the same, and no
// parent-gone notice names them); end the leases.
// Hints travel as the node's hint sender routes them (peer.RouteKnown:
// gone notices to the nodes that sent hints about the parent),
// delivered after the lookups and after the puts, until none are left;
// pages whose parent's drop is announced are dropped at once (no
// OrphanGrace: the replay has no time). ours-global also runs the
// coordinator's round (coord.Compute over the stores' gossip summaries)
// every --epoch requests and sets the stores' admission floor, as nodes do
// by default. The variants: ours-node (all of it but the coordinator),
// ours-nohints (no cross-node hints, no orphan reports), ours-noworth (no
// value hints between nodes), ours-nonotice (no parent-gone notices),
// ours-costblind (every page priced as at depth 0), ours-admit
// (store.EvictionTuning.CapacityAdmission), lru-leaf (the store with
// eviction.KindLRU).
//
// # Baselines (baseline.go)
//
// lru, lfu, gdsf-bytes, belady and infinite are textbook caches over bare
// eviction queues, one per node, without leaf-first ordering or hints: the
// client asks every block's owner, the hit prefix is the run of resident
// blocks, pinned until the request ends; a put evicts the queue's victims
// until the page fits, and the first refused put ends the request's puts.
// Belady evicts the page whose next use is farthest (deeper first among
// equal ones); it is the classic bound, not an optimum for prefix hits,
// and comes in two forms: belady, per node, storing every put (the bound
// for per-node policies that admit everything), and belady-bypass, one
// cache of the cluster's capacity that does not store a page used again
// no sooner than its victim (nor the rest of its request) and does not pin
// puts (the bound for policies that refuse puts or move them between
// nodes). The table states each size's capacity in KV bytes and in blocks
// (whole pages, all nodes).
// Orphaned bytes (resident pages whose parent is resident nowhere) are
// measured after every request, as a share of the total capacity.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-sim:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "strata-sim:", err)
		os.Exit(1)
	}
}

// Command strata-sim replays a Mooncake-format trace over simulated strata
// nodes and reports, for each cache size and eviction policy, the fraction
// of prefill FLOPs saved, the token hit rate and the bytes held by orphaned
// pages. It runs the eviction package's policy code unchanged.
//
//	go run ./cmd/strata-sim --trace ../shared/data/mooncake_synthetic_trace.jsonl \
//		--capacity-ratios 1:1:2:4 --placements 5
//
// # Model
//
// Each trace block (hash id, 512 tokens; the last block of a prompt may be
// partial) is a page of tokens × KV bytes per token. Its placement key is
// SHA-256(parent key || LE-uint64 hash id), and its owner the capacity-
// weighted rendezvous winner (package placement); with --placements k the
// node IDs, hence the owners, change k times and figures are averaged.
// Cache size is a percentage of the KV bytes of all distinct blocks, split
// over the nodes by --capacity-ratios.
//
// A request: the client asks every block's owner (owners Record the key);
// the hit prefix is the run of resident blocks from the first, wherever
// they live; its pages are Hit and pinned (the engine's lease) until the
// request ends. Prefill FLOPs saved are F(hit tokens) out of F(input
// tokens), F(s) = 2·N·s + 2·L·h·d_h·s². Then the blocks from the first miss
// on are put in order; a block already resident past the miss is skipped
// (EXISTS); the first put that is refused ends the request's puts, since
// later pages could not be hit. Put pages stay pinned until the request
// ends.
//
// Idealisations: lookups and hints cost nothing and arrive at once. A node
// knows its pages' resident local children exactly; with hints it also
// learns of children on other nodes (the child's owner tells the parent's);
// when a page goes, its resident descendants wherever they live are marked
// orphans (and unmarked when it is put again; the node's parent-gone
// notices), except with ours-nonotice; a client that sees a resident page
// whose parent is absent marks it an orphan. Every ours-* policy with hints
// drops a page as soon as it learns of its parent's drop, unless it is
// pinned (deepest first), as nodes do with parent-gone notices; pages a
// client reports are only marked (evicted first). With value hints (every
// ours-* policy but ours-nohints and ours-noworth) each page's Worth is
// passed up to its parent's owner after every request that hit or put it and
// after every eviction of a child (eviction.Queue.SetChildWorth). The
// global variant's coordinator runs every --epoch requests.
// Belady evicts the page whose next use is farthest (deeper first among
// equal ones); it is the classic bound, not an optimum for prefix hits.
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

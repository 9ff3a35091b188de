// Command gowriter is the Go side of the Python client's cross-language
// tests: it opens a namespace through the Go cluster client
// (github.com/stratakv/strata/client) and either puts pages for the given
// tokens or reads them back, printing one JSON object on stdout.
//
//	gowriter -addr 127.0.0.1:7070 -mode put -tokens 1,2,3,... [descriptor flags]
//	gowriter -addr 127.0.0.1:7070 -mode get -tokens 1,2,3,...
//	gowriter -addr 127.0.0.1:7070 -mode put -room R -tokens 1,2,3,...
//
// Page i's bytes are deterministic: byte j is (seed + 31*i + j) mod 251, so
// the other side can check them without being sent the data. put prints
// {"namespace_id", "page_bytes", "keys", "results"}; get prints
// {"namespace_id", "keys", "hit_prefix", "found", "sha256"} where sha256 is
// the hex digest of each page read (empty for a miss). put with -room opens
// the transfer room R before the put and publishes the pages in it after,
// adding "attempt".
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gowriter:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr       = flag.String("addr", "127.0.0.1:7070", "a node's gRPC address")
		mode       = flag.String("mode", "put", "put or get")
		tokensFlag = flag.String("tokens", "", "comma-separated token ids")
		seed       = flag.Int("seed", 7, "data pattern seed")
		room       = flag.String("room", "", "put: open this transfer room first and publish the pages in it")
		d          namespace.Descriptor
	)
	flag.StringVar(&d.Tenant, "tenant", "acme", "tenant")
	flag.StringVar(&d.Model, "model", "xlang/test-model", "model")
	flag.StringVar(&d.ModelRevision, "model-revision", "r1", "model revision")
	flag.StringVar(&d.Engine, "engine", "xlang", "engine")
	flag.StringVar(&d.DType, "dtype", "bf16", "dtype")
	pageTokens := flag.Uint("page-tokens", 16, "tokens per page")
	layers := flag.Uint("layers", 2, "num_layers")
	heads := flag.Uint("kv-heads", 2, "num_kv_heads")
	headDim := flag.Uint("head-dim", 32, "head_dim")
	keyFormat := flag.String("key-format", "sha256-chain", "key_format: sha256-chain or sha256-blocks")
	flag.Parse()
	d.PageTokens, d.NumLayers, d.NumKVHeads, d.HeadDim = uint32(*pageTokens), uint32(*layers), uint32(*heads), uint32(*headDim)
	var err error
	if d.KeyFormat, err = namespace.ParseKeyFormat(*keyFormat); err != nil {
		return err
	}

	var tokens []uint32
	for _, s := range strings.Split(*tokensFlag, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("token %q: %w", s, err)
		}
		tokens = append(tokens, uint32(v))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, *addr, client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()
	ns, err := cl.Open(ctx, d)
	if err != nil {
		return err
	}
	keys := ns.PageKeys(tokens)
	hexKeys := make([]string, len(keys))
	for i, k := range keys {
		hexKeys[i] = k.String()
	}
	out := map[string]any{"namespace_id": ns.ID().String(), "page_bytes": ns.PageBytes(), "keys": hexKeys}
	switch *mode {
	case "put":
		var r client.Room
		if *room != "" {
			if r, err = cl.OpenRoom(ctx, *room); err != nil {
				return err
			}
			out["attempt"] = r.Attempt
		}
		data := make([][]byte, len(keys))
		for i := range data {
			data[i] = make([]byte, ns.PageBytes())
			for j := range data[i] {
				data[i][j] = byte((*seed + 31*i + j) % 251)
			}
		}
		res, err := ns.Put(ctx, client.ChainPages(keys, data))
		if err != nil {
			return err
		}
		statuses := make([]string, len(res))
		for i, r := range res {
			statuses[i] = r.Status.String()
		}
		out["results"] = statuses
		if *room != "" {
			if _, err := cl.PublishRoom(ctx, r, ns, keys, len(keys)*int(d.PageTokens)); err != nil {
				return err
			}
		}
	case "get":
		hit, err := ns.Lookup(ctx, keys, false, 0)
		if err != nil {
			return err
		}
		bufs := make([][]byte, len(keys))
		for i := range bufs {
			bufs[i] = make([]byte, ns.PageBytes())
		}
		found, err := ns.Get(ctx, keys, bufs, nil)
		if err != nil {
			return err
		}
		sums := make([]string, len(keys))
		for i := range keys {
			if found[i] {
				s := sha256.Sum256(bufs[i])
				sums[i] = hex.EncodeToString(s[:])
			}
		}
		out["hit_prefix"], out["found"], out["sha256"] = hit.HitPrefix, found, sums
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

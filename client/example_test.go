package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// exampleNode starts a throwaway node for the examples; a real program dials
// a running stratad instead.
func exampleNode() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Listen: "127.0.0.1:0", DataDir: dir,
		EmbeddedEtcdURL: "http://127.0.0.1:0", HostBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	return n.Addr(), func() { n.Close(); os.RemoveAll(dir) }
}

// An engine stores the KV pages of a prompt, and later finds and loads the
// longest cached prefix of a prompt that shares it.
func Example() {
	addr, stop := exampleNode()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ns, err := c.Open(ctx, namespace.Descriptor{
		Tenant: "acme", Model: "meta-llama/Llama-3.1-8B", ModelRevision: "0e9e39f",
		Engine: "vllm", DType: "bf16", PageTokens: 16, NumLayers: 32, NumKVHeads: 8, HeadDim: 128,
		TPSize: 4, TPRank: 0,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("page bytes:", ns.PageBytes())

	prompt := make([]uint32, 100) // token ids
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	keys := ns.PageKeys(prompt) // 6 full pages of 16 tokens
	kv := make([][]byte, len(keys))
	for i := range kv {
		kv[i] = make([]byte, ns.PageBytes()) // the engine's KV bytes
	}
	if _, err := ns.Put(ctx, client.ChainPages(keys, kv)); err != nil {
		log.Fatal(err)
	}

	// A later request shares the first 70 tokens, then diverges.
	next := append(append([]uint32{}, prompt[:70]...), make([]uint32, 30)...)
	nextKeys := ns.PageKeys(next)
	hit, err := ns.Lookup(ctx, nextKeys, true, 0) // lease the hit prefix
	if err != nil {
		log.Fatal(err)
	}
	defer hit.Lease.Release(ctx)
	bufs := make([][]byte, hit.HitPrefix)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, nextKeys[:hit.HitPrefix], bufs, hit.Lease)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hit prefix: %d pages (%d tokens), loaded %d\n", hit.HitPrefix, hit.HitPrefix*ns.PageTokens(), len(found))
	// Output:
	// page bytes: 524288
	// hit prefix: 4 pages (64 tokens), loaded 4
}

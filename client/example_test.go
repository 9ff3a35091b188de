package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// exampleCluster starts a throwaway cluster of n nodes that share the first
// one's embedded etcd, and waits until they all see each other; a real
// program dials a running node or cluster instead.
func exampleCluster(n int) (addr string, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []*node.Node
	var dirs []string
	stop = func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].Close()
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	for range n {
		dir, err := os.MkdirTemp("", "strata-example")
		if err != nil {
			log.Fatal(err)
		}
		dirs = append(dirs, dir)
		cfg := node.Config{Listen: "127.0.0.1:0", DataDir: dir, EmbeddedEtcdURL: "http://127.0.0.1:0", HostBytes: 64 << 20}
		if len(nodes) > 0 {
			cfg.EtcdEndpoints = nodes[0].EtcdEndpoints()
		}
		nd, err := node.Start(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	conn, err := grpc.NewClient("passthrough:///"+nodes[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if err := awaitAlive(ctx, conn, n); err != nil {
		log.Fatal(err)
	}
	return nodes[0].Addr(), stop
}

// examplePrompt stores the KV pages of a prompt of pages pages, then looks
// up a later prompt that shares its first shared pages and diverges, leases
// the hit prefix and loads it; it returns the hit prefix and how many pages
// were loaded.
func examplePrompt(ctx context.Context, ns *client.Namespace, pages, shared int) (hit, loaded int) {
	tokens := ns.PageTokens()
	prompt := make([]uint32, tokens*pages+tokens/2) // token ids; the last page is partial
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	keys := ns.PageKeys(prompt) // the full pages
	kv := make([][]byte, len(keys))
	for i := range kv {
		kv[i] = make([]byte, ns.PageBytes()) // the engine's KV bytes
	}
	if _, err := ns.Put(ctx, client.ChainPages(keys, kv)); err != nil {
		log.Fatal(err)
	}

	next := append(append([]uint32{}, prompt[:tokens*shared+tokens/2]...), make([]uint32, tokens*4)...)
	nextKeys := ns.PageKeys(next)
	lr, err := ns.Lookup(ctx, nextKeys, true, 0) // lease the hit prefix on its nodes
	if err != nil {
		log.Fatal(err)
	}
	defer lr.Lease.Release(ctx)
	bufs := make([][]byte, lr.HitPrefix)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, nextKeys[:lr.HitPrefix], bufs, lr.Lease)
	if err != nil {
		log.Fatal(err)
	}
	for _, ok := range found {
		if ok { // a page not found (its node failed meanwhile) is recomputed
			loaded++
		}
	}
	return lr.HitPrefix, loaded
}

// An engine stores the KV pages of a prompt, and later finds and loads the
// longest cached prefix of a prompt that shares it. A single node is a
// cluster of one.
func Example() {
	addr, stop := exampleCluster(1)
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
	// A prompt of 6 full pages and a partial one; a later request shares
	// its first four and a half pages, then diverges.
	hit, loaded := examplePrompt(ctx, ns, 6, 4)
	fmt.Printf("hit prefix: %d pages (%d tokens), loaded %d\n", hit, hit*ns.PageTokens(), loaded)
	// Output:
	// page bytes: 524288
	// hit prefix: 4 pages (64 tokens), loaded 4
}

// An engine talks to a whole cluster through any one node's address: the
// client learns the members, places each page on its node, and merges the
// nodes' answers into one hit prefix.
func Example_cluster() {
	addr, stop := exampleCluster(3)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, addr, client.Options{NodeTimeout: 2 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("members:", len(c.Members()))
	ns, err := c.Open(ctx, namespace.Descriptor{
		Tenant: "acme", Model: "meta-llama/Llama-3.1-8B", ModelRevision: "0e9e39f",
		Engine: "vllm", DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 8, HeadDim: 128,
	})
	if err != nil {
		log.Fatal(err)
	}
	hit, loaded := examplePrompt(ctx, ns, 24, 20)
	fmt.Printf("hit prefix: %d pages, loaded %d\n", hit, loaded)
	// Output:
	// members: 3
	// hit prefix: 20 pages, loaded 20
}

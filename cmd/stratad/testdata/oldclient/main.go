// Command oldclient is the client of the previous release in the rolling
// upgrade test (upgrade_test.go): the test copies this file into that
// release's tree, at cmd/oldclient, and builds it there, so it talks to the
// cluster through the old client package (client.DialCluster). It puts or
// reads the pages of one prompt (tokens seed<<20 | i, 16 a page); the page
// bytes come from, or go to, the file --data (the pages one after another),
// so that the test alone decides and checks them.
//
//	oldclient --addr 127.0.0.1:7070 --op put|get --seed 1 --pages 100 --revision r1 --data FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

type args struct {
	addr, op, rev, data string
	seed                uint
	pages               int
}

func main() {
	var a args
	flag.StringVar(&a.addr, "addr", "", "a node's gRPC address")
	flag.StringVar(&a.op, "op", "get", "put or get")
	flag.UintVar(&a.seed, "seed", 1, "prompt seed")
	flag.IntVar(&a.pages, "pages", 100, "pages in the prompt")
	flag.StringVar(&a.rev, "revision", "r1", "model revision of the namespace")
	flag.StringVar(&a.data, "data", "", "file of the page bytes: read by put, written by get (zeros where a page was not found)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, a); err != nil {
		fmt.Fprintln(os.Stderr, "oldclient:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, a args) error {
	c, err := client.DialCluster(ctx, a.addr, client.ClusterOptions{NodeTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "upgrade", Model: "m", ModelRevision: a.rev, Engine: "test",
		DType: "bf16", PageTokens: 16, NumLayers: 4, NumKVHeads: 4, HeadDim: 64})
	if err != nil {
		return err
	}
	toks := make([]uint32, 16*a.pages)
	for i := range toks {
		toks[i] = uint32(a.seed)<<20 | uint32(i)
	}
	keys := ns.PageKeys(toks)
	size := ns.PageBytes()
	if a.op == "put" {
		data, err := os.ReadFile(a.data)
		if err != nil || len(data) != len(keys)*size {
			return fmt.Errorf("--data: want %d pages of %d bytes: %d bytes, %v", len(keys), size, len(data), err)
		}
		pages := make([][]byte, len(keys))
		for i := range pages {
			pages[i] = data[i*size : (i+1)*size]
		}
		res, err := ns.Put(ctx, client.ChainPages(keys, pages))
		stored := 0
		for _, r := range res {
			if r.Status.Stored() {
				stored++
			}
		}
		fmt.Printf("put %d stored %d\n", len(keys), stored)
		return err
	}
	hit, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil {
		return err
	}
	if hit.Lease != nil {
		defer hit.Lease.Release(ctx)
	}
	out := make([]byte, len(keys)*size)
	bufs := make([][]byte, hit.HitPrefix)
	for i := range bufs {
		bufs[i] = out[i*size : (i+1)*size]
	}
	found, err := ns.Get(ctx, keys[:hit.HitPrefix], bufs, hit.Lease)
	n := 0
	for i, ok := range found {
		if !ok {
			clear(bufs[i])
			continue
		}
		n++
	}
	fmt.Printf("get hit %d found %d\n", hit.HitPrefix, n)
	return firstErr(err, os.WriteFile(a.data, out, 0o600))
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Command oldclient is the client of the previous release in the rolling
// upgrade test (upgrade_test.go): the test copies this file into that
// release's tree, at cmd/oldclient, and builds it there, so it talks to the
// cluster through the old client package (client.DialCluster). It puts or
// checks the pages of one prompt (tokens seed<<20 | i, 16 a page), whose
// bytes derive from their keys as pageOf does in the test.
//
//	oldclient --addr 127.0.0.1:7070 --op put|check --seed 1 --pages 100 --revision r1
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

func main() {
	addr := flag.String("addr", "", "a node's gRPC address")
	op := flag.String("op", "check", "put or check")
	seed := flag.Uint("seed", 1, "prompt seed")
	pages := flag.Int("pages", 100, "pages in the prompt")
	rev := flag.String("revision", "r1", "model revision of the namespace")
	flag.Parse()
	if err := run(*addr, *op, uint32(*seed), *pages, *rev); err != nil {
		fmt.Fprintln(os.Stderr, "oldclient:", err)
		os.Exit(1)
	}
}

func run(addr, op string, seed uint32, pages int, rev string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialCluster(ctx, addr, client.ClusterOptions{NodeTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	ns, err := c.Open(ctx, namespace.Descriptor{Tenant: "upgrade", Model: "m", ModelRevision: rev, Engine: "test",
		DType: "bf16", PageTokens: 16, NumLayers: 4, NumKVHeads: 4, HeadDim: 64})
	if err != nil {
		return err
	}
	toks := make([]uint32, 16*pages)
	for i := range toks {
		toks[i] = seed<<20 | uint32(i)
	}
	keys := ns.PageKeys(toks)
	if op == "put" {
		data := make([][]byte, len(keys))
		for i, k := range keys {
			data[i] = pageOf(k, ns.PageBytes())
		}
		res, err := ns.Put(ctx, client.ChainPages(keys, data))
		if err != nil {
			return err
		}
		stored := 0
		for _, r := range res {
			if r.Status.Stored() {
				stored++
			}
		}
		fmt.Printf("put %d stored %d\n", len(keys), stored)
		return nil
	}
	hit, err := ns.Lookup(ctx, keys, true, 0)
	if err != nil {
		return err
	}
	if hit.Lease != nil {
		defer hit.Lease.Release(ctx)
	}
	bufs := make([][]byte, hit.HitPrefix)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, keys[:hit.HitPrefix], bufs, hit.Lease)
	if err != nil {
		return err
	}
	n := 0
	for i, ok := range found {
		if ok {
			if !bytes.Equal(bufs[i], pageOf(keys[i], ns.PageBytes())) {
				return fmt.Errorf("page %d served with wrong bytes", i)
			}
			n++
		}
	}
	fmt.Printf("check hit %d found %d\n", hit.HitPrefix, n)
	return nil
}

func pageOf(k namespace.Key, size int) []byte {
	out := make([]byte, 0, size)
	block := k
	for len(out) < size {
		block = sha256.Sum256(block[:])
		out = append(out, block[:]...)
	}
	return out[:size]
}

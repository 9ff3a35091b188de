package registry_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratakv/strata/registry"
)

// A node with no etcd endpoints runs etcd itself, in its data directory, and
// registers there.
func Example() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	etcd, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	err = reg.RegisterNode(ctx, registry.Node{
		ID:          "node-1",
		GRPCAddress: "10.0.0.1:7070",
		Tiers:       []registry.TierInfo{{Kind: "host", Capacity: 64 << 30}},
	})
	if err != nil {
		log.Fatal(err)
	}
	nodes, err := reg.Nodes(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range nodes {
		fmt.Println(n.ID, n.GRPCAddress, n.Tiers[0].Kind)
	}
	// Output: node-1 10.0.0.1:7070 host
}

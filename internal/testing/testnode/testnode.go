// Package testnode starts strata nodes for tests, on loopback ports the
// kernel picks, and stops them with the test: in-process nodes (Start),
// in-process clusters sharing an embedded etcd of their own (StartCluster),
// and stratad processes (Run, and Spawn for any child process that says
// when it is ready). Start and StartCluster return once every node serves;
// Run once the process logged its serving line.
//
// Around the nodes: loopback addresses free or closed (FreePort,
// ClosedAddr), a gRPC connection to a node (Dial), a fake gRPC server
// (Serve), a wait for a node's membership view (AwaitMembers), and a
// gossip member whose gRPC address answers nothing (StartGhost), and the
// bytes a test writes as a key's page and checks what it reads back
// against (PageOf, PagesOf, CountExact).
// internal/poll waits for anything else the nodes do next;
// client/admin/admintest fills nodes with namespaces and pages.
package testnode

import (
	"cmp"
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/registry"
)

// startTimeout bounds starting one node or etcd.
const startTimeout = 60 * time.Second

// Node is an in-process node whose Close may be called more than once
// (the test's cleanup calls it too).
type Node struct {
	*node.Node
	once sync.Once
	err  error
}

// Close closes the node the first time; later calls return its error.
func (n *Node) Close() error {
	n.once.Do(func() { n.err = n.Node.Close() })
	return n.err
}

// Start runs a node in-process with cfg, whose zero Listen, DataDir and
// etcd take loopback and per-test defaults: Listen 127.0.0.1:0, DataDir a
// fresh tb.TempDir(), and an embedded etcd on a free port unless
// EtcdEndpoints is set. The test's cleanup closes it, failing the test if
// closing fails.
func Start(tb testing.TB, cfg node.Config) *Node {
	tb.Helper()
	cfg.Listen = cmp.Or(cfg.Listen, "127.0.0.1:0")
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	if len(cfg.EtcdEndpoints) == 0 {
		cfg.EmbeddedEtcdURL = cmp.Or(cfg.EmbeddedEtcdURL, "http://127.0.0.1:0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	nd, err := node.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("starting node: %v", err)
	}
	n := &Node{Node: nd}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("closing node %s: %v", n.ID(), err)
		}
	})
	return n
}

// Cluster is in-process nodes sharing an embedded etcd of their own, so
// that any node may close while the others go on.
type Cluster struct {
	Etcd  *registry.Embedded
	Nodes []*Node
	once  sync.Once
}

// StartCluster starts an etcd and n nodes on it (Start's defaults, with
// mod, when not nil, applied to node i's config). The test's cleanup
// closes the cluster.
func StartCluster(tb testing.TB, n int, mod func(i int, cfg *node.Config)) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: tb.TempDir(), ClientURL: "http://127.0.0.1:0"})
	if err != nil {
		tb.Fatalf("starting etcd: %v", err)
	}
	c := &Cluster{Etcd: e}
	tb.Cleanup(c.Close)
	for i := range n {
		cfg := node.Config{EtcdEndpoints: e.Endpoints()}
		if mod != nil {
			mod(i, &cfg)
		}
		c.Nodes = append(c.Nodes, Start(tb, cfg))
	}
	return c
}

// Close closes every node, then the etcd; later calls do nothing.
func (c *Cluster) Close() {
	c.once.Do(func() {
		for _, n := range c.Nodes {
			n.Close()
		}
		c.Etcd.Close()
	})
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ClosedAddr is a loopback address nothing listens on (a port that was
// free a moment ago).
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

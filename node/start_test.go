package node_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/registry"
)

// TestStartFailures: every way node.Start can fail that a config or the
// machine can cause returns an error (never a panic) and releases what it
// had started: the same data dir then starts cleanly (the embedded etcd's
// lock, the SSD files and the ports were let go), and no goroutine outlives
// the test (TestMain's leak check).
func TestStartFailures(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(dir string, cfg *node.Config)
		want string
	}{
		{"data dir is a file", func(_ string, c *node.Config) { c.DataDir = file }, "creating data dir"},
		{"node id unreadable", func(dir string, c *node.Config) { os.Mkdir(filepath.Join(dir, "node-id"), 0o700) }, "reading node id"},
		{"unknown tier", func(_ string, c *node.Config) { c.Tiers = []string{"tape"} }, `unknown tier "tape"`},
		{"tier twice", func(_ string, c *node.Config) { c.Tiers = []string{"host", "host"} }, "listed twice"},
		{"ssd without bytes", func(_ string, c *node.Config) { c.Tiers = []string{"host", "ssd"}; c.SSDBytes = 0 }, "--ssd-bytes not set"},
		{"ssd dir is a file", func(_ string, c *node.Config) { c.SSDDir = file }, "ssd tier"},
		{"embedded etcd not on loopback", func(_ string, c *node.Config) { c.EmbeddedEtcdURL = "http://192.0.2.1:2379" }, "loopback"},
		{"grpc port taken", func(_ string, c *node.Config) { c.Listen = taken.Addr().String() }, "listening on"},
		{"bad gossip address", func(_ string, c *node.Config) { c.GossipAddr = "127.0.0.1:none" }, "gossip port"},
		{"coordination config", func(_ string, c *node.Config) { c.CoordRound = -time.Second }, "coord"},
		{"lookup bookkeeping no number", func(_ string, c *node.Config) { c.LookupBookkeeping = math.NaN() }, "lookup bookkeeping budget NaN"},
		{"reserve share past 1", func(_ string, c *node.Config) { c.ReserveShare = 1.5 }, "reserve share 1.5: want a share of each tier in (0, 1]"},
		{"reserve share negative", func(_ string, c *node.Config) { c.ReserveShare = -0.5 }, "reserve share -0.5"},
		{"reserve share no number", func(_ string, c *node.Config) { c.ReserveShare = math.NaN() }, "reserve share NaN"},
		{"reserve TTL past the longest", func(_ string, c *node.Config) { c.ReserveTTL, c.MaxReserveTTL = time.Minute, time.Second },
			"default reservation TTL 1m0s exceeds the maximum 1s"},
		{"admin port taken", func(_ string, c *node.Config) { c.AdminListen = taken.Addr().String() }, "admin listener"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := node.Config{DataDir: dir, Listen: "127.0.0.1:0", EmbeddedEtcdURL: "http://127.0.0.1:0",
				Tiers: []string{"host", "ssd"}, HostBytes: 4 << 20, SSDBytes: 16 << 20}
			good := cfg
			tc.mod(dir, &cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n, err := node.Start(ctx, cfg)
			if err == nil {
				n.Close()
				t.Fatal("started")
			}
			if n != nil {
				t.Fatalf("a failed Start returned a node")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			t.Logf("error: %v", err)
			if tc.name == "node id unreadable" {
				os.Remove(filepath.Join(dir, "node-id"))
			}
			if cfg.DataDir == file {
				return
			}
			n, err = node.Start(ctx, good)
			if err != nil {
				t.Fatalf("starting again on the same data dir without the fault: %v", err)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartWithoutEtcd: a node restarted while its (external) etcd is down
// starts degraded from its local copy of the registry, says so in health,
// serves its recovered SSD pages to a client that had the namespace open
// before, and registers once etcd is back.
func TestStartWithoutEtcd(t *testing.T) {
	etcdDir, dataDir := t.TempDir(), t.TempDir()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", testnode.FreePort(t))
	startEtcd := func() *registry.Embedded {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: etcdDir, ClientURL: etcdURL})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := startEtcd()
	cfg := node.Config{DataDir: dataDir, Listen: fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t)),
		Tiers: []string{"ssd"}, SSDBytes: 64 << 20, EtcdEndpoints: e.Endpoints(), EtcdDialTimeout: 500 * time.Millisecond}
	n := testnode.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, ns := openNS(t, n.Addr(), client.Options{NodeTimeout: 2 * time.Second}, desc)
	keys, pages := chain(ns, 0, 32)
	if _, err := ns.Put(ctx, pages); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	e.Close()

	began := time.Now()
	n = testnode.Start(t, cfg)
	t.Logf("started with etcd down in %v", time.Since(began).Round(time.Millisecond))
	if !n.Degraded() {
		t.Fatal("node with etcd down does not say it is degraded")
	}
	if got := registryHealth(t, n); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("registry health %v while degraded", got)
	}
	if body := healthz(t, n); !strings.HasPrefix(body, "degraded") {
		t.Fatalf("/healthz says %q while degraded", body)
	}
	poll.Until(t, 20*time.Second, 50*time.Millisecond, "the open namespace's pages served again", func() bool {
		return readBackQuiet(ns, keys) == len(keys)
	})
	if got := readBack(t, ns, keys); got != len(keys) {
		t.Fatalf("degraded node served %d of %d recovered pages", got, len(keys))
	}
	// A new client opening the known namespace is answered without etcd.
	c2, ns2 := openNS(t, n.Addr(), client.Options{NodeTimeout: 2 * time.Second}, desc)
	if got := readBack(t, ns2, keys); got != len(keys) {
		t.Fatalf("a new client read %d of %d pages", got, len(keys))
	}
	// One it never knew fails clearly.
	other := desc
	other.Model = "never-seen"
	if _, err := c2.Open(ctx, other); err == nil || !strings.Contains(err.Error(), "degraded") {
		t.Fatalf("opening an unknown namespace while degraded: %v, want an error saying degraded", err)
	}

	e = startEtcd()
	defer e.Close()
	poll.Until(t, 30*time.Second, 100*time.Millisecond, "the node registered after etcd returned", func() bool {
		return !n.Degraded()
	})
	reg, err := registry.Open(ctx, registry.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	nodes, err := reg.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != n.ID() || nodes[0].GRPCAddress != n.Addr() {
		t.Fatalf("registered nodes %+v (%v), want %s at %s", nodes, err, n.ID(), n.Addr())
	}
	if got := registryHealth(t, n); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("registry health %v after etcd returned", got)
	}
	if body := healthz(t, n); body != "ok" {
		t.Fatalf("/healthz says %q after etcd returned", body)
	}
	if _, err := c2.Open(ctx, other); err != nil {
		t.Fatalf("opening a new namespace after etcd returned: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

func registryHealth(t *testing.T, n *testnode.Node) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	cc := testnode.Dial(t, n.Addr())
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(),
		&healthpb.HealthCheckRequest{Service: node.RegistryHealthService})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetStatus()
}

func healthz(t *testing.T, n *testnode.Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.AdminAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// readBackQuiet counts the pages of keys served with the right bytes; a
// failed call counts none.
func readBackQuiet(ns *client.Namespace, keys []namespace.Key) int {
	bufs := make([][]byte, len(keys))
	for j := range bufs {
		bufs[j] = make([]byte, ns.PageBytes())
	}
	ok, err := ns.Get(context.Background(), keys, bufs, nil)
	if err != nil {
		return 0
	}
	found := 0
	for j, k := range keys {
		if ok[j] && string(bufs[j]) == string(testnode.PageOf(k, ns.PageBytes())) {
			found++
		}
	}
	return found
}

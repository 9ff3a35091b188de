package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/placement"
	"github.com/stratakv/strata/registry"
)

// TestEtcdProcess is not a test: run as a child process (by startEtcd) it
// serves a real single-member etcd until killed, so cluster tests have an
// etcd that lives apart from every node.
func TestEtcdProcess(t *testing.T) {
	dir, url := os.Getenv("STRATA_TEST_ETCD_DIR"), os.Getenv("STRATA_TEST_ETCD_URL")
	if dir == "" {
		t.Skip("runs only as the etcd child process of the cluster tests")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	e, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: dir, ClientURL: url})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("etcd ready", e.Endpoints()[0])
	<-ctx.Done()
	e.Close()
}

// etcdReady is the etcd child's ready line.
var etcdReady = regexp.MustCompile(`^etcd ready`)

// startEtcd runs an etcd child process on url with its data in dir.
func startEtcd(t *testing.T, dir, url string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEtcdProcess$")
	cmd.Env = append(os.Environ(), "STRATA_TEST_ETCD_DIR="+dir, "STRATA_TEST_ETCD_URL="+url)
	testnode.Spawn(t, cmd, false, etcdReady, 30*time.Second)
	return cmd
}

// freeEtcdURL is a loopback client URL on a port free a moment ago.
func freeEtcdURL(t *testing.T) string { return "http://" + freeAddr(t) }

// freeAddr is a loopback address on a port free a moment ago.
func freeAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t)) }

// clusterNodeArgs: pages on an SSD tier (kill -9 keeps what was written),
// one shared etcd.
func clusterNodeArgs(etcd string) []string {
	return []string{"--etcd", etcd, "--tiers", "ssd", "--ssd-bytes", "128MiB", "--ssd-sync", "none"}
}

func waitAlive(t *testing.T, c *client.Client, want int, limit time.Duration) {
	t.Helper()
	n := 0
	if !poll.Within(limit, 100*time.Millisecond, func() bool {
		n = 0
		for _, m := range c.Members() {
			if m.State == client.MemberAlive {
				n++
			}
		}
		return n == want
	}) {
		t.Fatalf("%d alive members after %v, want %d: %+v", n, limit, want, c.Members())
	}
}

func clusterPages(ns *client.Namespace, seed uint32, pages int) ([]namespace.Key, [][]byte) {
	toks := make([]uint32, 16*pages)
	for i := range toks {
		toks[i] = seed<<20 | uint32(i)
	}
	return chainOf(ns, toks)
}

// readAll gets keys and checks that whatever is found is byte-exact; it
// returns how many were found.
func readAll(t *testing.T, ctx context.Context, ns *client.Namespace, keys []namespace.Key) int {
	t.Helper()
	bufs := pageBufs(ns, len(keys))
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil && !errors.Is(err, client.ErrUnavailable) {
		t.Fatal(err)
	}
	return testnode.CountExact(t, keys, found, bufs)
}

// TestClusterProcesses runs three stratad processes on one etcd process:
// a long prompt's pages spread over all three; a client given one address
// finds them all; kill -9 of one node under load turns its pages into
// misses within seconds, with no wrong bytes and no call past its deadline;
// restarted, the node rejoins and serves its recovered pages; a fourth node
// takes about a quarter of the keys' ownership.
func TestClusterProcesses(t *testing.T) {
	stratad := buildStratad(t)
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	cmds, addrs := make([]*exec.Cmd, 3), make([]string, 3)
	for i := range dirs {
		cmds[i], addrs[i] = startStratad(t, stratad, dirs[i], clusterNodeArgs(etcdURL)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const nodeTimeout = 2 * time.Second
	_, ns := dialOpen(t, ctx, addrs[0], client.Options{NodeTimeout: nodeTimeout}, 3, ssdDescriptor)
	keys, data := clusterPages(ns, 1, 300)
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		t.Fatal(err)
	}
	for i, a := range addrs {
		if p := nodeInfo(t, a).GetPages(); p < 50 {
			t.Fatalf("node %d holds %d of 300 pages: not spread", i, p)
		}
	}
	// A second client that knows only node 3 finds every page.
	c3, ns3 := dialOpen(t, ctx, addrs[2], client.Options{NodeTimeout: nodeTimeout, CacheEntries: -1}, 3, ssdDescriptor)
	lr, err := ns3.Lookup(ctx, keys, false, 0)
	if err != nil || lr.HitPrefix != len(keys) {
		t.Fatalf("lookup via node 3: hit prefix %d of %d, %v", lr.HitPrefix, len(keys), err)
	}
	if n := readAll(t, ctx, ns3, keys); n != len(keys) {
		t.Fatalf("read %d of %d pages via node 3", n, len(keys))
	}

	// kill -9 node 2 while readers run; every call ends within its deadline.
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	var slow error
	var mu sync.Mutex
	var rounds atomic.Int64 // lookup+get rounds done
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				start := time.Now()
				cctx, ccancel := context.WithTimeout(ctx, 3*nodeTimeout)
				ns3.Lookup(cctx, keys, false, 0)
				readAll(t, cctx, ns3, keys[:50])
				ccancel()
				if d := time.Since(start); d > 3*nodeTimeout+time.Second {
					mu.Lock()
					slow = fmt.Errorf("a lookup+get took %v", d)
					mu.Unlock()
				}
				rounds.Add(1)
			}
		})
	}
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the readers under way", func() bool { return rounds.Load() >= 4 })
	killed := time.Now()
	cmds[1].Process.Signal(syscall.SIGKILL)
	cmds[1].Wait()
	waitAlive(t, c3, 2, 15*time.Second)
	t.Logf("view dropped the killed node %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	close(stopLoad)
	wg.Wait()
	if slow != nil {
		t.Fatal(slow)
	}
	found := readAll(t, ctx, ns3, keys)
	if found == len(keys) || found == 0 {
		t.Fatalf("after the kill %d of %d pages found: want the dead node's pages missing", found, len(keys))
	}

	// Restarted on its data dir, node 2 rejoins and serves its pages again.
	cmds[1], addrs[1] = startStratad(t, stratad, dirs[1], clusterNodeArgs(etcdURL)...)
	waitAlive(t, c3, 3, 30*time.Second)
	if n := 0; !poll.Within(20*time.Second, 200*time.Millisecond, func() bool { n = readAll(t, ctx, ns3, keys); return n == len(keys) }) {
		t.Fatalf("after the restart %d of %d pages found", n, len(keys))
	}

	// A fourth node moves about a quarter of the keys' ownership.
	before := ownerIDs(t, c3.Members(), keys)
	startStratad(t, stratad, t.TempDir(), clusterNodeArgs(etcdURL)...)
	waitAlive(t, c3, 4, 30*time.Second)
	after := ownerIDs(t, c3.Members(), keys)
	moved := 0
	for i := range keys {
		if before[i] != after[i] {
			moved++
		}
	}
	share := float64(moved) / float64(len(keys))
	t.Logf("fourth node: %.1f%% of %d keys changed owner", 100*share, len(keys))
	if share < 0.15 || share > 0.35 {
		t.Fatalf("%.1f%% of keys moved, want about 25%%", 100*share)
	}
}

// ownerIDs computes each key's owner over the alive members, as clients do.
func ownerIDs(t *testing.T, members []client.Member, keys []namespace.Key) []string {
	t.Helper()
	var nodes []placement.Node
	for _, m := range members {
		if m.State == client.MemberAlive {
			nodes = append(nodes, placement.Node{ID: m.ID, Weight: m.Weight})
		}
	}
	v, err := placement.NewView(nodes)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = v.Node(v.Owner(k)).ID
	}
	return out
}

// TestClusterEtcdDown: with etcd stopped the data plane keeps serving reads
// and writes of known namespaces, opening a new namespace fails with a clear
// error, and everything works again once etcd is back.
func TestClusterEtcdDown(t *testing.T) {
	stratad := buildStratad(t)
	etcdDir := t.TempDir()
	etcdURL := freeEtcdURL(t)
	etcd := startEtcd(t, etcdDir, etcdURL)
	_, a1 := startStratad(t, stratad, t.TempDir(), clusterNodeArgs(etcdURL)...)
	startStratad(t, stratad, t.TempDir(), clusterNodeArgs(etcdURL)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, ns := dialOpen(t, ctx, a1, client.Options{NodeTimeout: 2 * time.Second}, 2, ssdDescriptor)
	keys, data := clusterPages(ns, 2, 100)
	if _, err := ns.Put(ctx, client.ChainPages(keys[:50], data[:50])); err != nil {
		t.Fatal(err)
	}

	etcd.Process.Signal(syscall.SIGKILL)
	etcd.Wait()
	// Writes and reads of the known namespace go on.
	res, err := ns.Put(ctx, client.ChainPages(keys, data))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Status.Stored() {
			t.Fatalf("page %d with etcd down: %v %s", i, r.Status, r.Reason)
		}
	}
	if n := readAll(t, ctx, ns, keys); n != len(keys) {
		t.Fatalf("read %d of %d with etcd down", n, len(keys))
	}
	// A new namespace cannot be registered: a clear error, not a hang.
	other := ssdDescriptor
	other.ModelRevision = "r2"
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = c.Open(octx, other)
	ocancel()
	if err == nil || !strings.Contains(err.Error(), "registry unavailable") {
		t.Fatalf("opening a new namespace with etcd down: %v, want a registry unavailable error", err)
	}

	// etcd returns: the new namespace opens.
	startEtcd(t, etcdDir, etcdURL)
	poll.NoError(t, 30*time.Second, 500*time.Millisecond, "the new namespace opening after etcd returned", func() error {
		octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
		defer ocancel()
		_, err := c.Open(octx, other)
		return err
	})
}

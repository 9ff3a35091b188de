package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
)

// binDir holds the binaries the tests build, once per test run.
var (
	binDir   string
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stratad-test-bin")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles a command of this module, once per test run.
func build(t *testing.T, pkg string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if out, ok := binBuilt[pkg]; ok {
		return out
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	binBuilt[pkg] = out
	return out
}

// buildStratad skips t in -short mode (it runs real processes) and returns
// the stratad binary.
func buildStratad(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real processes")
	}
	return build(t, "./cmd/stratad")
}

// startStratad runs the stratad binary as README's run command does, on
// loopback ports the kernel picks, and returns its gRPC address.
func startStratad(t *testing.T, bin, dataDir string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	p := testnode.Run(t, bin, append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--embedded-etcd-url", "http://127.0.0.1:0"}, extra...)...)
	return p.Cmd, p.Addr
}

// dialOpen dials addr with opts, waits until the client sees alive alive
// members (0: does not wait), and opens d; the client closes with the test.
func dialOpen(t *testing.T, ctx context.Context, addr string, opts client.Options, alive int, d namespace.Descriptor) (*client.Client, *client.Namespace) {
	t.Helper()
	c, err := client.Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if alive > 0 {
		waitAlive(t, c, alive, 30*time.Second)
	}
	ns, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// chainOf is the keys of toks in ns, with their pages' bytes
// (testnode.PageOf): a chain to put.
func chainOf(ns *client.Namespace, toks []uint32) ([]namespace.Key, [][]byte) {
	keys := ns.PageKeys(toks)
	return keys, testnode.PagesOf(keys, ns.PageBytes())
}

// exact says whether b holds exactly the bytes of k's page
// (testnode.PageOf).
func exact(k namespace.Key, b []byte) bool { return bytes.Equal(b, testnode.PageOf(k, len(b))) }

// pageBufs returns n buffers of ns's page size.
func pageBufs(ns *client.Namespace, n int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	return bufs
}

// TestRunNodeThenList is README's promise: the run command serves on
// localhost, a client creates a namespace, and `strata ns ls` shows it;
// SIGTERM drains and exits 0; a restart on the same data dir still knows it.
func TestRunNodeThenList(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	stratad, strata := build(t, "./cmd/stratad"), build(t, "./cmd/strata")
	data := t.TempDir()
	cmd, addr := startStratad(t, stratad, data)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := namespace.Descriptor{Tenant: "readme", Model: "Qwen/Qwen2.5-7B", ModelRevision: "main", Engine: "sglang",
		DType: "bf16", PageTokens: 64, NumLayers: 4, NumKVHeads: 4, HeadDim: 128}
	_, ns := dialOpen(t, ctx, addr, client.Options{}, 0, d)
	toks := make([]uint32, 64*3)
	for i := range toks {
		toks[i] = uint32(i)
	}
	keys := ns.PageKeys(toks)
	data3 := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
	if _, err := ns.Put(ctx, client.ChainPages(keys, data3)); err != nil {
		t.Fatal(err)
	}

	list := func() []map[string]any {
		t.Helper()
		out, err := exec.Command(strata, "--endpoint", addr, "ns", "ls", "-o", "json").Output()
		if err != nil {
			t.Fatalf("strata ns ls: %v", err)
		}
		var doc struct {
			Namespaces []map[string]any `json:"namespaces"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("strata ns ls -o json: %v\n%s", err, out)
		}
		return doc.Namespaces
	}
	found := false
	for _, n := range list() {
		if n["id"] == ns.ID().String() {
			found = true
		}
	}
	if !found {
		t.Fatalf("strata ns ls does not show namespace %s", ns.ID())
	}
	table, err := exec.Command(strata, "--endpoint", addr, "ns", "ls").Output()
	if err != nil || !strings.Contains(string(table), ns.ID().Short()) || !strings.Contains(string(table), "readme") {
		t.Fatalf("strata ns ls table: %v\n%s", err, table)
	}

	// SIGTERM drains and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stratad after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stratad did not exit within 30s of SIGTERM")
	}

	// Restarted on the same data dir, the namespace is known again.
	_, addr = startStratad(t, stratad, data)
	addrRestarted := addr
	found = false
	for _, n := range list() {
		if n["id"] == ns.ID().String() {
			found = true
		}
	}
	if !found {
		t.Fatalf("after restart, %s does not list namespace %s", addrRestarted, ns.ID())
	}
}

// TestParseOrphanGrace: --orphan-grace reaches node.Config; unset, the
// node's default applies (0 here).
func TestParseOrphanGrace(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{{nil, 0}, {[]string{"--orphan-grace", "-1s"}, -time.Second}, {[]string{"--orphan-grace", "250ms"}, 250 * time.Millisecond}} {
		cfg, err := parseFlags(tc.args)
		if err != nil || cfg.OrphanGrace != tc.want {
			t.Errorf("%v: OrphanGrace %v, %v; want %v", tc.args, cfg.OrphanGrace, err, tc.want)
		}
	}
}

// TestParseGossip: the gossip profile and its overrides reach
// node.Config; unset, the profile's defaults apply (zero here); a profile
// that is not local, lan nor wan is refused.
func TestParseGossip(t *testing.T) {
	cfg, err := parseFlags([]string{"--gossip-profile", "wan", "--gossip-probe-interval", "2s", "--gossip-interval", "300ms",
		"--gossip-nodes", "5", "--gossip-push-pull-interval", "2m"})
	if err != nil || cfg.GossipProfile != "wan" || cfg.GossipProbeInterval != 2*time.Second || cfg.GossipInterval != 300*time.Millisecond ||
		cfg.GossipNodes != 5 || cfg.GossipPushPullInterval != 2*time.Minute {
		t.Fatalf("gossip flags: %+v, %v", cfg, err)
	}
	if cfg, err := parseFlags(nil); err != nil || cfg.GossipProfile != "" || cfg.GossipNodes != 0 {
		t.Fatalf("no gossip flags: profile %q, nodes %d, %v", cfg.GossipProfile, cfg.GossipNodes, err)
	}
	if _, err := parseFlags([]string{"--gossip-profile", "huge"}); err == nil {
		t.Fatal("--gossip-profile huge accepted")
	}
}

// TestParseLookupBookkeeping: --lookup-bookkeeping reaches node.Config;
// unset, the store's default applies (0 here); a share that is no number
// is refused.
func TestParseLookupBookkeeping(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want float64
	}{{nil, 0}, {[]string{"--lookup-bookkeeping", "-1"}, -1}, {[]string{"--lookup-bookkeeping", "0.5"}, 0.5}} {
		cfg, err := parseFlags(tc.args)
		if err != nil || cfg.LookupBookkeeping != tc.want {
			t.Errorf("%v: LookupBookkeeping %v, %v; want %v", tc.args, cfg.LookupBookkeeping, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--lookup-bookkeeping", "a quarter"}); err == nil {
		t.Error("--lookup-bookkeeping 'a quarter': no error")
	}
}

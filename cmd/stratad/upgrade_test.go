package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
)

// previousRelease is the commit the rolling-upgrade test upgrades from: the
// last commit before the restructuring of December 1 (d0bf506 and after),
// the "old build" benchmarks/README compares against. Move it forward when
// a release is cut.
const previousRelease = "4115451"

// upgradeDescriptor is the namespace of the upgrade test at a model
// revision; testdata/oldclient/main.go opens the same.
func upgradeDescriptor(rev string) namespace.Descriptor {
	return namespace.Descriptor{Tenant: "upgrade", Model: "m", ModelRevision: rev, Engine: "test",
		DType: "bf16", PageTokens: 16, NumLayers: 4, NumKVHeads: 4, HeadDim: 64}
}

// previous holds the binaries of the previous release.
type previous struct{ stratad, strata, client string }

// buildPrevious extracts previousRelease from git history (git archive: the
// repository's worktrees and refs are left alone) and builds its stratad
// and testdata/oldclient against its own client package. It skips the
// test, saying why, where the history is absent (a shallow clone).
func buildPrevious(t *testing.T) previous {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH: cannot build the previous release")
	}
	if out, err := exec.Command("git", "-C", "../..", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("commit %s is not in this clone's history (shallow clone?): %v %s", previousRelease, err, out)
	}
	tree := t.TempDir()
	archive, err := exec.Command("git", "-C", "../..", "archive", "--format=tar", previousRelease).Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", previousRelease, err)
	}
	if err := untar(tree, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/oldclient/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, "cmd", "oldclient"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "cmd", "oldclient", "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	p := previous{stratad: filepath.Join(bin, "stratad"), strata: filepath.Join(bin, "strata"), client: filepath.Join(bin, "oldclient")}
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/stratad", "./cmd/strata", "./cmd/oldclient")
	cmd.Dir = tree
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", previousRelease, err, b)
	}
	return p
}

// untar writes a tar stream's regular files and directories under dir.
func untar(dir string, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q leaves the tree", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm()|0o600); err == nil {
				_, err = io.Copy(f, tr)
				err = firstErr(err, f.Close())
			}
		}
		if err != nil {
			return err
		}
	}
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// oldClient runs the previous release's client on the pages of prompt
// seed of revision r1 (see testdata/oldclient) and returns what it printed.
func oldClient(t *testing.T, p previous, addr, op string, seed uint32, data string) string {
	t.Helper()
	out, err := exec.Command(p.client, "--addr", addr, "--op", op, "--seed", fmt.Sprint(seed),
		"--pages", fmt.Sprint(upgradePages), "--data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("old client %s via %s: %v\n%s", op, addr, err, out)
	}
	return strings.TrimSpace(string(out))
}

// oldPut has the old client put prompt seed, with the bytes testnode.PageOf gives.
func oldPut(t *testing.T, p previous, ns *client.Namespace, addr string, seed uint32) {
	t.Helper()
	keys, data := clusterPages(ns, seed, upgradePages)
	file := filepath.Join(t.TempDir(), "pages")
	if err := os.WriteFile(file, bytes.Join(data, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := oldClient(t, p, addr, "put", seed, file), fmt.Sprintf("put %d stored %d", len(keys), len(keys)); got != want {
		t.Fatalf("old client put via %s: %s, want %s", addr, got, want)
	}
}

// oldGet has the old client look up and get prompt seed, and checks that
// it found every page, byte-exact.
func oldGet(t *testing.T, p previous, ns *client.Namespace, addr string, seed uint32) {
	t.Helper()
	keys, _ := clusterPages(ns, seed, upgradePages)
	file := filepath.Join(t.TempDir(), "pages")
	if got, want := oldClient(t, p, addr, "get", seed, file), fmt.Sprintf("get hit %d found %d", len(keys), len(keys)); got != want {
		t.Fatalf("old client reading prompt %d via %s: %s, want %s", seed, addr, got, want)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	size := ns.PageBytes()
	for i, k := range keys {
		if !exact(k, data[i*size:(i+1)*size]) {
			t.Fatalf("old client via %s: page %d of prompt %d has wrong bytes", addr, i, seed)
		}
	}
}

// upgradePages is the length of each prompt of the upgrade test, in pages.
const upgradePages = 200

// TestRollingUpgrade runs a node of the previous release and one of this
// build on one etcd, with clients of both versions: each client reads
// through either node what the other wrote, byte-exact, and the previous
// release's CLI lists the namespace through either node. Then the old node
// is upgraded in place (SIGTERM, the new binary on its data dir, as a
// rolling restart does) and both clients still find every page (the SSD
// tier recovers them). Last, after a rollout to a new model revision, the
// old revision's namespaces are retired with `strata ns drain`: their
// pages go, the new revision's stay.
func TestRollingUpgrade(t *testing.T) {
	stratad := buildStratad(t)
	strata := build(t, "./cmd/strata")
	started := time.Now()
	old := buildPrevious(t)
	t.Logf("previous release %s built in %v", previousRelease, time.Since(started).Round(time.Second))

	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	oldDir := t.TempDir()
	oldCmd, oldAddr := startStratad(t, old.stratad, oldDir, clusterNodeArgs(etcdURL)...)
	_, newAddr := startStratad(t, stratad, t.TempDir(), clusterNodeArgs(etcdURL)...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, ns := dialOpen(t, ctx, newAddr, client.Options{NodeTimeout: 5 * time.Second}, 2, upgradeDescriptor("r1"))
	const pages = upgradePages

	// The new client writes prompt 1, the old one prompt 2 (through the old node).
	keys1, data1 := clusterPages(ns, 1, pages)
	if _, err := ns.Put(ctx, client.ChainPages(keys1, data1)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{oldAddr, newAddr} {
		if n := nodeInfo(t, a).GetPages(); n == 0 {
			t.Fatalf("node %s holds none of the %d pages: the mixed cluster does not spread them", a, pages)
		}
	}
	oldPut(t, old, ns, oldAddr, 2)
	keys2, _ := clusterPages(ns, 2, pages)
	mixed := func(stage string) {
		t.Helper()
		for _, a := range []string{oldAddr, newAddr} {
			oldGet(t, old, ns, a, 1)
		}
		if n := readAll(t, ctx, ns, keys2); n != pages {
			t.Fatalf("%s: the new client read %d of the old client's %d pages", stage, n, pages)
		}
		lr, err := ns.Lookup(ctx, keys1, false, 0)
		if err != nil || lr.HitPrefix != pages {
			t.Fatalf("%s: new client lookup: hit prefix %d of %d, %v", stage, lr.HitPrefix, pages, err)
		}
	}
	mixed("mixed cluster")
	// The previous release's CLI (its admin client) sees the namespace on both nodes.
	for _, a := range []string{oldAddr, newAddr} {
		out, err := exec.Command(old.strata, "--endpoint", a, "ns", "ls", "-o", "json").CombinedOutput()
		if err != nil || !strings.Contains(string(out), ns.ID().String()) {
			t.Fatalf("the previous release's strata ns ls via %s: %v\n%s", a, err, out)
		}
	}

	// Upgrade the old node in place: drain it, start this build on its data dir.
	if err := oldCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := oldCmd.Wait(); err != nil {
		t.Fatalf("old node after SIGTERM: %v", err)
	}
	_, oldAddr = startStratad(t, stratad, oldDir, clusterNodeArgs(etcdURL)...)
	waitAlive(t, c, 2, 30*time.Second)
	poll.Until(t, 30*time.Second, 200*time.Millisecond, "after the upgrade, every page of prompt 1 found again",
		func() bool { return readAll(t, ctx, ns, keys1) == pages })
	mixed("after the upgrade")

	// Roll out revision r2; retire r1 with an idle TTL on all its namespaces.
	ns2, err := c.Open(ctx, upgradeDescriptor("r2"))
	if err != nil {
		t.Fatal(err)
	}
	keys3, data3 := clusterPages(ns2, 3, pages)
	if _, err := ns2.Put(ctx, client.ChainPages(keys3, data3)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(strata, "--endpoint", newAddr, "ns", "drain", "--model", "m", "--keep-revision", "r2",
		"--ttl", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("strata ns drain: %v\n%s", err, out)
	}
	t.Logf("strata ns drain:\n%s", out)
	if !strings.Contains(string(out), ns.ID().String()) || strings.Contains(string(out), ns2.ID().String()) {
		t.Fatalf("ns drain names the wrong namespaces (want %s, not %s):\n%s", ns.ID(), ns2.ID(), out)
	}
	// Node page counts, not lookups: a lookup is a use, which the TTL counts
	// from (in whole seconds).
	poll.Until(t, 30*time.Second, 200*time.Millisecond, "revision r1's pages gone after ns drain", func() bool {
		return nodeInfo(t, oldAddr).GetPages()+nodeInfo(t, newAddr).GetPages() == pages
	})
	if n := readAll(t, ctx, ns, append(keys1, keys2...)); n != 0 {
		t.Fatalf("%d pages of revision r1 left after ns drain", n)
	}
	if n := readAll(t, ctx, ns2, keys3); n != pages {
		t.Fatalf("revision r2 kept %d of %d pages after r1 was drained", n, pages)
	}
	t.Logf("rolling upgrade from %s took %v", previousRelease, time.Since(started).Round(time.Second))
}

//go:build chaos

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// The chaos suite: real stratad processes (three, SSD tier only, sync
// every-page, on an etcd process of their own) under a load that verifies
// every byte it reads and records every acknowledgement, through kill -9
// and restart, SIGSTOP of a node, and an etcd outage with a node restarted
// during it. Each experiment prints its figures: pages acknowledged, pages
// served, wrong bytes, calls past their deadline, acknowledged pages not
// served after the fault healed, and ops/s before, during and after.
// Wrong bytes and calls past their deadline fail the suite, and so does an
// acknowledged page that no node holds afterwards (no tier evicts here:
// the SSD tiers have room for everything the load writes). An
// acknowledged page a get does not find but a node holds was written to
// its second placement candidate while its owner was unreachable (the
// client reads a page from its owner, or from where its location cache
// saw it): it is counted and printed, and must be served again within
// handoffWait, once its holder has handed it back to its owner (hinted
// handoff), or the suite fails. So must one in a check get that failed,
// the client quarantining the node it asked; the experiment prints how
// often the client quarantined a node and the last reason.
//
//	go test -tags chaos -run '^TestChaos' -v ./cmd/stratad     (scripts/chaos.sh)
//
// TestChaosFullDisk runs one node with its SSD directory on a tmpfs, empty
// and then full, and compares lookup p99 (skipped where a tmpfs cannot be
// mounted). TestChaosPartition (chaos_partition_test.go) cuts a node off
// in network namespaces the test makes (skipped where it cannot make
// them), TestChaosStall (chaos_stall_test.go) stalls a reader and two
// writers halfway, and TestChaosSoak (chaos_soak_test.go) runs the load
// for 75 s and bounds the growth of the nodes' goroutines, FDs and RSS.

// chaosDesc has 16 KiB pages.
var chaosDesc = namespace.Descriptor{Tenant: "chaos", Model: "m", ModelRevision: "r", Engine: "test",
	DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}

const (
	chaosCallTimeout = 2 * time.Second
	chaosSlack       = time.Second // a call later than its deadline by more is "past its deadline"
)

// chaosNode is one stratad process the suite may kill and restart on the
// same data dir and gRPC port; netns, if set, is the network namespace it
// runs in (ip netns exec).
type chaosNode struct {
	bin, dir, listen, etcd string
	netns                  string
	extra                  []string // more flags
	cmd                    *exec.Cmd
	addr, admin            string // gRPC and admin HTTP addresses
}

// chaosServing matches stratad's serving line on any address (a node in a
// network namespace listens on the address of its veth).
var chaosServing = regexp.MustCompile(`strata node serving.*addr=(\S+).*admin=(\S+)`)

func (n *chaosNode) start(t *testing.T) {
	t.Helper()
	args := append([]string{"--data-dir", n.dir, "--listen", n.listen, "--embedded-etcd-url", "http://127.0.0.1:0",
		"--etcd", n.etcd, "--tiers", "ssd", "--ssd-bytes", "512MiB", "--ssd-sync", "every-page"}, n.extra...)
	n.cmd = exec.Command(n.bin, args...)
	if n.netns != "" {
		n.cmd = exec.Command("ip", append([]string{"netns", "exec", n.netns, n.bin}, args...)...)
	}
	m := testnode.Spawn(t, n.cmd, true, chaosServing, time.Minute)
	n.addr, n.admin = m[1], m[2]
}

func (n *chaosNode) kill() {
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.cmd.Wait()
}

// chaosLoad is the load: one writer putting fresh 4-page chains, one
// reader getting random acknowledged pages; every answer is checked.
type chaosLoad struct {
	ns          *client.Namespace
	quarantined *quarantineLog // the client's quarantines: why gets missed

	mu    sync.Mutex
	acked []namespace.Key // every page acknowledged (Committed)

	ops, served, wrong, late atomic.Int64
	missed, uncommitted      atomic.Int64 // get misses, put pages not committed: the fault's visible effect
	stop                     chan struct{}
	wg                       sync.WaitGroup
}

// dialLoad dials addr with opts, waits for alive members, opens chaosDesc
// and returns the load on it, not yet running.
func dialLoad(t *testing.T, ctx context.Context, addr string, opts client.Options, alive int) (*client.Client, *chaosLoad) {
	t.Helper()
	q := &quarantineLog{}
	opts.Logger = slog.New(q)
	c, ns := dialOpen(t, ctx, addr, opts, alive, chaosDesc)
	return c, &chaosLoad{ns: ns, quarantined: q}
}

// quarantineLog is a slog handler that keeps the client's "node
// quarantined" lines (a call to the node failed or passed NodeTimeout):
// the reason a load saw misses, or wrote pages to a non-owner, when no
// fault was injected (a node slow under the CPU other work takes).
type quarantineLog struct {
	mu   sync.Mutex
	n    int64
	last string // node and error of the latest; guarded by mu
}

func (q *quarantineLog) Enabled(context.Context, slog.Level) bool { return true }
func (q *quarantineLog) WithAttrs([]slog.Attr) slog.Handler       { return q }
func (q *quarantineLog) WithGroup(string) slog.Handler            { return q }

func (q *quarantineLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "node quarantined" {
		return nil
	}
	var node, err string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "err":
			err = a.Value.String()
		}
		return true
	})
	q.mu.Lock()
	q.n++
	q.last = node + ": " + err
	q.mu.Unlock()
	return nil
}

// since says how many quarantines came after the first n0, and the last.
func (q *quarantineLog) since(n0 int64) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == n0 {
		return "0"
	}
	return fmt.Sprintf("%d (the last: %s)", q.n-n0, q.last)
}

func (q *quarantineLog) count() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

func (l *chaosLoad) run(seed uint64) {
	l.stop = make(chan struct{})
	l.wg.Go(l.write)
	l.wg.Go(func() { l.read(seed) })
}

func (l *chaosLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

func (l *chaosLoad) call(fn func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosCallTimeout)
	began := time.Now()
	fn(ctx)
	cancel()
	if time.Since(began) > chaosCallTimeout+chaosSlack {
		l.late.Add(1)
	}
	l.ops.Add(1)
}

func (l *chaosLoad) write() {
	for seq := uint32(0); ; seq++ {
		select {
		case <-l.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		toks := make([]uint32, 16*4)
		for i := range toks {
			toks[i] = seq<<8 | uint32(i)
		}
		keys, data := chainOf(l.ns, toks)
		l.call(func(ctx context.Context) {
			res, err := l.ns.Put(ctx, client.ChainPages(keys, data))
			if err != nil {
				l.uncommitted.Add(int64(len(keys)))
				return
			}
			l.mu.Lock()
			for i, r := range res {
				if r.Status == client.Committed {
					l.acked = append(l.acked, keys[i])
				} else {
					l.uncommitted.Add(1)
				}
			}
			l.mu.Unlock()
		})
	}
}

func (l *chaosLoad) read(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		l.mu.Lock()
		if len(l.acked) == 0 {
			l.mu.Unlock()
			continue
		}
		keys := make([]namespace.Key, 8)
		for i := range keys {
			keys[i] = l.acked[rng.IntN(len(l.acked))]
		}
		l.mu.Unlock()
		bufs := pageBufs(l.ns, len(keys))
		l.call(func(ctx context.Context) {
			found, err := l.ns.Get(ctx, keys, bufs, nil)
			if err != nil {
				l.missed.Add(int64(len(keys)))
				return
			}
			for i, k := range keys {
				if !found[i] {
					l.missed.Add(1)
					continue
				}
				if !exact(k, bufs[i]) {
					l.wrong.Add(1)
				} else {
					l.served.Add(1)
				}
			}
		})
	}
}

// notServed gets every acknowledged page now and returns those not served
// exact (wrong bytes count in l.wrong too): failed, those of the check's
// gets during which the client quarantined a node (the get failed on it),
// and missing, the others. total is the pages acknowledged.
func (l *chaosLoad) notServed(t *testing.T) (failed, missing []namespace.Key, total int) {
	l.mu.Lock()
	acked := slices.Clone(l.acked)
	l.mu.Unlock()
	failed, missing = l.notServedOf(t, acked)
	return failed, missing, len(acked)
}

// notServedOf is notServed of the pages acked.
func (l *chaosLoad) notServedOf(t *testing.T, acked []namespace.Key) (failed, missing []namespace.Key) {
	for start := 0; start < len(acked); start += 256 {
		batch := acked[start:min(len(acked), start+256)]
		bufs := pageBufs(l.ns, len(batch))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q0 := l.quarantined.count()
		found, err := l.ns.Get(ctx, batch, bufs, nil)
		cancel()
		if err != nil {
			t.Fatalf("checking acknowledged pages: %v", err)
		}
		into := &missing
		if l.quarantined.count() != q0 {
			into = &failed
		}
		for i, k := range batch {
			switch {
			case !found[i]:
				*into = append(*into, k)
			case !exact(k, bufs[i]):
				l.wrong.Add(1)
				missing = append(missing, k)
			}
		}
	}
	return failed, missing
}

// handedBack waits, up to handoffWait, until the acknowledged pages a get
// did not find but a non-owner holds are served (their holder hands them
// back to their owner once it has been alive a while: peer
// Handoff), and returns those still not served and how long it waited.
func (l *chaosLoad) handedBack(t *testing.T, missing []namespace.Key) ([]namespace.Key, time.Duration) {
	began := time.Now()
	poll.Within(handoffWait, 500*time.Millisecond, func() bool {
		if len(missing) > 0 {
			failed, still := l.notServedOf(t, missing)
			missing = append(failed, still...)
		}
		return len(missing) == 0
	})
	return missing, time.Since(began)
}

// handoffWait bounds the wait for pages to go back to their owners: the
// owner must be alive for 5 s first, and a node hands back 256 pages a
// second.
const handoffWait = 60 * time.Second

// heldAnywhere counts the keys some node holds (its StatKeys): a page a
// get did not find that a node holds was put on a non-owner (a spill,
// while its owner was unreachable) and is not lost; one no node holds is.
func heldAnywhere(t *testing.T, nodes []*chaosNode, id namespace.ID, keys []namespace.Key) int {
	held := make([]bool, len(keys))
	for _, n := range nodes {
		admin := adminClient(t, n.addr)
		for start := 0; start < len(keys); start += 1024 {
			batch := keys[start:min(len(keys), start+1024)]
			req := &pb.StatKeysRequest{NamespaceId: id[:]}
			for _, k := range batch {
				req.Keys = append(req.Keys, k[:])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := admin.StatKeys(ctx, req)
			cancel()
			if err != nil {
				t.Fatalf("stat keys on %s: %v", n.addr, err)
			}
			for i, ki := range resp.GetKeys() {
				if len(ki.GetKey()) > 0 {
					held[start+i] = true
				}
			}
		}
	}
	n := 0
	for _, h := range held {
		if h {
			n++
		}
	}
	return n
}

// chaosCluster is three nodes on an etcd process of their own.
type chaosCluster struct {
	etcd             *exec.Cmd
	etcdDir, etcdURL string
	nodes            []*chaosNode
	seeds            []string // the nodes' gRPC addresses
}

func startChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	bin := buildStratad(t)
	cl := &chaosCluster{etcdDir: t.TempDir(), etcdURL: freeEtcdURL(t)}
	cl.etcd = startEtcd(t, cl.etcdDir, cl.etcdURL)
	for range 3 {
		n := &chaosNode{bin: bin, dir: t.TempDir(), etcd: cl.etcdURL, listen: freeAddr(t)}
		n.start(t)
		cl.nodes = append(cl.nodes, n)
		cl.seeds = append(cl.seeds, n.addr)
	}
	return cl
}

func TestChaos(t *testing.T) {
	cl := startChaosCluster(t)
	nodes, seeds := cl.nodes, cl.seeds
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, l := dialLoad(t, ctx, seeds[0], client.Options{Seeds: seeds[1:], NodeTimeout: time.Second}, 3)
	l.run(1)
	defer func() {
		if l.stop != nil {
			l.halt()
		}
	}()

	const phase = 4 * time.Second
	experiments := []struct {
		name  string
		fault func(t *testing.T) // runs the fault and heals it; its time is "during"
	}{
		{"kill -9 and restart, twice", func(t *testing.T) {
			for range 2 {
				nodes[1].kill()
				time.Sleep(time.Second) // the fault's span: the node stays dead a second while the load runs
				nodes[1].start(t)
				waitAlive(t, c, 3, 30*time.Second)
			}
		}},
		{"SIGSTOP a node for 4s", func(t *testing.T) {
			nodes[2].cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(phase) // the fault's span: the node stays stopped while the load runs
			nodes[2].cmd.Process.Signal(syscall.SIGCONT)
			waitAlive(t, c, 3, 30*time.Second)
		}},
		{"etcd down, a node restarted during it", func(t *testing.T) {
			cl.etcd.Process.Signal(syscall.SIGKILL)
			cl.etcd.Wait()
			time.Sleep(time.Second) // the fault's span: the cluster runs without etcd before a node restarts
			nodes[0].kill()
			nodes[0].start(t) // comes up degraded from its local copy of the registry
			time.Sleep(phase) // the fault's span: etcd stays down while the load runs
			cl.etcd = startEtcd(t, cl.etcdDir, cl.etcdURL)
			waitAlive(t, c, 3, 30*time.Second)
		}},
	}
	failed := false
	for _, ex := range experiments {
		if !l.experiment(t, ex.name, nodes, phase, ex.fault) {
			failed = true
		}
	}
	l.halt()
	l.stop = nil
	if failed {
		t.Logf("nodes: %v", seeds)
	}
}

// experiment measures the load for phase, runs fault (its time is
// "during"), measures for phase again, checks that every acknowledged page
// is served (or held by some node), prints the experiment's figures and
// reports whether it passed: no wrong bytes, no call past its deadline, no
// acknowledged page lost.
func (l *chaosLoad) experiment(t *testing.T, name string, nodes []*chaosNode, phase time.Duration, fault func(t *testing.T)) bool {
	t.Helper()
	ops0, served0, wrong0, late0 := l.ops.Load(), l.served.Load(), l.wrong.Load(), l.late.Load()
	missed0, uncommitted0, quarantined0 := l.missed.Load(), l.uncommitted.Load(), l.quarantined.count()
	l.mu.Lock()
	acked0 := len(l.acked)
	l.mu.Unlock()
	rate := func(f func()) float64 {
		before := l.ops.Load()
		began := time.Now()
		f()
		return float64(l.ops.Load()-before) / time.Since(began).Seconds()
	}
	undisturbed := func() { time.Sleep(phase) } // a real load for a real span: nothing to wait for but the clock
	before := rate(undisturbed)
	var took time.Duration
	during := rate(func() {
		began := time.Now()
		fault(t)
		took = time.Since(began)
	})
	after := rate(undisturbed)
	failed, missing, total := l.notServed(t)
	heldFailed := heldAnywhere(t, nodes, l.ns.ID(), failed)
	elsewhere := heldAnywhere(t, nodes, l.ns.ID(), missing)
	lost := len(failed) - heldFailed + len(missing) - elsewhere
	stillMissing, waited := l.handedBack(t, append(slices.Clone(failed), missing...))
	wrong, late := l.wrong.Load()-wrong0, l.late.Load()-late0
	t.Logf("chaos %q (fault %v): acknowledged %d pages (%d put but not committed), served %d (%d get misses), "+
		"wrong bytes %d, calls past deadline %d, acknowledged pages not served after %d of %d (%d in check gets "+
		"that failed, the client quarantining the node: %d of them held by a node; %d not found: %d of them held "+
		"by a non-owner, written there while the owner was unreachable; %d lost), ops/s before %.0f during %.0f "+
		"after %.0f (%d ops); the client quarantined a node %s; not served %v later, once handed back to their "+
		"owners: %d",
		name, took.Round(time.Millisecond), total-acked0, l.uncommitted.Load()-uncommitted0, l.served.Load()-served0,
		l.missed.Load()-missed0, wrong, late, len(failed)+len(missing), total, len(failed), heldFailed, len(missing),
		elsewhere, lost, before, during, after, l.ops.Load()-ops0, l.quarantined.since(quarantined0),
		waited.Round(time.Millisecond), len(stillMissing))
	if wrong != 0 || late != 0 || lost != 0 || len(stillMissing) != 0 {
		t.Errorf("chaos %q: %d wrong bytes, %d calls past deadline, %d acknowledged pages lost, %d not served %v after "+
			"the fault healed", name, wrong, late, lost, len(stillMissing), waited.Round(time.Millisecond))
		return false
	}
	return true
}

// TestChaosFullDisk: one stratad whose SSD directory is a tmpfs (16 MiB)
// under a writer and a looker-up, once with the file system empty and
// once full; the full run must keep lookup p99 within twice the empty
// run's and commit every put (on the host tier). Skipped where a tmpfs
// cannot be mounted (it needs CAP_SYS_ADMIN).
func TestChaosFullDisk(t *testing.T) {
	bin := buildStratad(t)
	run := func(full bool) (p99 time.Duration, puts, committed int) {
		dir := t.TempDir()
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16777216"); err != nil {
			t.Skipf("cannot mount a tmpfs for a full file system: %v", err)
		}
		defer syscall.Unmount(dir, syscall.MNT_DETACH)
		if full {
			fillDir(t, dir)
		}
		cmd, addr := startStratad(t, bin, t.TempDir(), "--tiers", "host,ssd", "--host-bytes", "8MiB",
			"--ssd-bytes", "12MiB", "--ssd-dir", dir)
		defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, ns := dialOpen(t, ctx, addr, client.Options{NoShm: true}, 0, chaosDesc)
		var lat []time.Duration
		stop := time.Now().Add(6 * time.Second)
		for seq := uint32(0); time.Now().Before(stop); seq++ {
			keys, data := clusterPages(ns, seq, 8)
			res, err := ns.Put(ctx, client.ChainPages(keys, data))
			if err != nil {
				t.Fatal(err)
			}
			puts += len(res)
			for _, r := range res {
				if r.Status == client.Committed {
					committed++
				}
			}
			began := time.Now()
			if _, err := ns.Lookup(ctx, keys, false, 0); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(began))
		}
		slices.Sort(lat)
		if ssd := nodeInfoTier(t, addr, pb.Tier_TIER_SSD); full && ssd.GetFault() != "disk-full" {
			t.Errorf("the full run's SSD tier: %v, want fault disk-full", ssd)
		}
		return lat[len(lat)*99/100], puts, committed
	}
	emptyP99, emptyPuts, emptyOK := run(false)
	fullP99, fullPuts, fullOK := run(true)
	t.Logf("chaos \"full SSD file system\": lookup p99 %v without the fault, %v with it; puts committed %d of %d without, %d of %d with",
		emptyP99, fullP99, emptyOK, emptyPuts, fullOK, fullPuts)
	if fullOK != fullPuts {
		t.Errorf("%d of %d puts committed on a full SSD file system, want every one (on the host tier)", fullOK, fullPuts)
	}
	if fullP99 > 2*emptyP99+time.Millisecond {
		t.Errorf("lookup p99 %v on a full SSD file system, more than twice %v", fullP99, emptyP99)
	}
}

// fillDir allocates a file in dir until its file system has no 4 KiB
// block left (fallocate in steps from 1 MiB down).
func fillDir(t *testing.T, dir string) {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(0)
	for step := int64(1 << 20); step >= 4096; step /= 2 {
		for syscall.Fallocate(int(f.Fd()), 0, off, step) == nil {
			off += step
		}
	}
}

func nodeInfoTier(t *testing.T, addr string, tier pb.Tier) *pb.TierStats {
	for _, ts := range nodeInfo(t, addr).GetTiers() {
		if ts.GetTier() == tier {
			return ts
		}
	}
	return nil
}

package benchmarks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	loadgen "github.com/stratakv/strata/benchmarks/load"
	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// Sizes shared by every benchmark, so that the node figures and the machine
// limits beside them move the same bytes over the same working set.
const (
	// hostBytes is the node's host tier.
	hostBytes = 1 << 30
	// workingSet is how many bytes of pages a get benchmark reads round-robin
	// (and memcpy and loopback TCP copy from): far larger than the CPU
	// caches, well within hostBytes.
	workingSet = 256 << 20
	// putRound is how many bytes of fresh pages a put benchmark writes before
	// it deletes them with the timer stopped, so puts never wait on eviction.
	putRound = 512 << 20
	// maxClients is the most concurrent clients any benchmark runs.
	maxClients = 8
)

// pageSizes and clientCounts span the sub-benchmarks of put, get and the
// machine limits.
var (
	pageSizes    = []int{64 << 10, 256 << 10, 2 << 20}
	clientCounts = []int{1, maxClients}
)

// sizeLabel names a byte count the way sub-benchmarks do: 64KiB, 2MiB.
func sizeLabel(n int) string { return loadgen.SizeLabel(n) }

// startNode runs a real node in-process: embedded etcd and gRPC on loopback
// ports the kernel picks, a host tier of hostBytes. It closes with tb.
func startNode(tb testing.TB, hostBytes int64) *testnode.Node {
	tb.Helper()
	return testnode.Start(tb, node.Config{HostBytes: hostBytes})
}

// bySize runs run as one sub-benchmark page=<size> per page size.
func bySize(b *testing.B, sizes []int, run func(b *testing.B, size int)) {
	for _, size := range sizes {
		b.Run("page="+sizeLabel(size), func(b *testing.B) { run(b, size) })
	}
}

// nsBySize runs run as bySize does, with cs's namespaces for pages of that
// size (nss[c] is client c's).
func nsBySize(b *testing.B, cs []*client.Client, sizes []int, run func(b *testing.B, size int, nss []*client.Namespace)) {
	bySize(b, sizes, func(b *testing.B, size int) {
		run(b, size, openAll(b.Context(), b, cs, descriptor(size)))
	})
}

// byClients runs run as one sub-benchmark <unit>=C per client count C,
// each operation moving size bytes.
func byClients(b *testing.B, unit string, size int, run func(b *testing.B, clients int)) {
	for _, clients := range clientCounts {
		b.Run(fmt.Sprintf("%s=%d", unit, clients), func(b *testing.B) {
			b.SetBytes(int64(size))
			run(b, clients)
		})
	}
}

// pageBuffers returns one size-byte buffer per client.
func pageBuffers(size int) [][]byte {
	bufs := make([][]byte, maxClients)
	for c := range bufs {
		bufs[c] = make([]byte, size)
	}
	return bufs
}

// dialClients opens k clients, each with its own gRPC connection to addr,
// shared memory and the raw tcp data plane off: these benchmarks measure
// the gRPC data path (raw_test.go measures the raw one).
func dialClients(tb testing.TB, addr string, k int) []*client.Client {
	return dialClientsWith(tb, addr, k, client.Options{NoShm: true, NoRaw: true})
}

// dialClientsWith opens k clients with opts.
func dialClientsWith(tb testing.TB, addr string, k int, opts client.Options) []*client.Client {
	tb.Helper()
	cs := make([]*client.Client, k)
	for i := range cs {
		c, err := client.Dial(tb.Context(), addr, opts)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// descriptor is a namespace of explicit pageBytes-byte pages, 16 tokens a
// page.
func descriptor(pageBytes int) namespace.Descriptor {
	return namespace.Descriptor{Tenant: "bench", Model: "m", ModelRevision: "r", Engine: "bench",
		DType: "bf16", PageTokens: 16, PageBytes: uint64(pageBytes)}
}

// openAll opens d on every client (the handshake also makes the lazy
// connections).
func openAll(ctx context.Context, tb testing.TB, cs []*client.Client, d namespace.Descriptor) []*client.Namespace {
	tb.Helper()
	nss := make([]*client.Namespace, len(cs))
	for i, c := range cs {
		ns, err := c.Open(ctx, d)
		if err != nil {
			tb.Fatalf("opening namespace on client %d: %v", i, err)
		}
		nss[i] = ns
	}
	return nss
}

// pageKey is the key of the page numbered n of a benchmark.
func pageKey(id namespace.ID, n uint64) namespace.Key { return loadgen.PageKey(id, n) }

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte { return loadgen.RandomBytes(n, seed) }

// putRange publishes pages numbered [from, to) of ns, all holding data, in
// batches of at most 64 MiB, and fails unless each is stored.
func putRange(ctx context.Context, ns *client.Namespace, from, to uint64, data []byte) error {
	return loadgen.PutRange(ctx, ns, from, to, data)
}

// deleteRange deletes pages numbered [from, to) of ns and fails unless
// every one was there.
func deleteRange(ctx context.Context, ns *client.Namespace, from, to uint64) error {
	deleted, err := loadgen.DeleteRange(ctx, ns, from, to)
	if err == nil && deleted != int(to-from) {
		err = fmt.Errorf("deleted %d of pages %d..%d", deleted, from, to)
	}
	return err
}

// load is a closed-loop workload: clients goroutines share b.N operations,
// each starting its next as soon as its last returns, and every operation is
// timed on its own.
type load struct {
	clients int
	// round, if positive, is how many operations run before between runs.
	round int
	// op performs operation i (0 <= i < b.N) as client c (0 <= c < clients).
	// It must not touch b: it runs on another goroutine.
	op func(ctx context.Context, c, i int) error
	// between, if set, runs after each round, with the timer stopped, on the
	// operations [from, to) just done.
	between func(ctx context.Context, from, to int) error
}

// run runs b.N operations and reports, besides ns/op (wall time per
// operation, all clients together), the p50 and p99 latency of one
// operation and the CPU time the process spent per operation (cpu-µs/op:
// client and node together, the figure that stays put when other work on
// the machine steals the cores).
func (l load) run(b *testing.B) {
	ctx := b.Context()
	lat := make([]time.Duration, b.N)
	round := b.N
	if l.round > 0 && l.between != nil {
		round = l.round
	}
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for from := 0; from < b.N; from += round {
		to := min(b.N, from+round)
		c0 := loadgen.CPUTime()
		err := l.runRound(ctx, from, to, lat)
		cpu += loadgen.CPUTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		if l.between != nil {
			b.StopTimer()
			if err := l.between(ctx, from, to); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(time.Microsecond), "cpu-µs/op")
}

// runRound runs operations [from, to) on l.clients goroutines, recording
// each one's duration in lat, and returns the first error.
func (l load) runRound(ctx context.Context, from, to int, lat []time.Duration) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	next.Store(int64(from))
	for c := range l.clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				t0 := time.Now()
				err := l.op(ctx, c, i)
				lat[i] = time.Since(t0)
				if err != nil {
					once.Do(func() { first = fmt.Errorf("operation %d on client %d: %w", i, c, err) })
					next.Store(int64(to)) // the others stop after their current operation
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// reportLatency reports the median and 99th percentile of lat (nearest rank)
// in microseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	rank := func(p float64) time.Duration {
		return lat[max(0, int(math.Ceil(p*float64(len(lat))))-1)]
	}
	b.ReportMetric(float64(rank(0.50))/float64(time.Microsecond), "p50-µs")
	b.ReportMetric(float64(rank(0.99))/float64(time.Microsecond), "p99-µs")
}

// getPage is a load op that gets page i mod len(keys) of the working set
// through client c's namespace into its buffer, under lease (nil: none),
// and fails if the page is missing.
func getPage(nss []*client.Namespace, keys []namespace.Key, bufs [][][]byte, lease *client.Lease) func(context.Context, int, int) error {
	return func(ctx context.Context, c, i int) error {
		j := i % len(keys)
		found, err := nss[c].Get(ctx, keys[j:j+1], bufs[c], lease)
		if err != nil {
			return err
		}
		if !found[0] {
			return fmt.Errorf("page %d not found", j)
		}
		return nil
	}
}

// getWorkingSet publishes workingSet bytes of size-byte pages through ns
// for Get benchmarks and returns their keys, one reusable page buffer per
// client, and the function that deletes them again (deferred by the
// caller, while ns's client is still open).
func getWorkingSet(ctx context.Context, b *testing.B, ns *client.Namespace, size int) ([]namespace.Key, [][][]byte, func()) {
	b.Helper()
	pages := workingSet / size
	if err := putRange(ctx, ns, 0, uint64(pages), randomBytes(size, 2)); err != nil {
		b.Fatal(err)
	}
	keys := make([]namespace.Key, pages)
	for i := range keys {
		keys[i] = pageKey(ns.ID(), uint64(i))
	}
	bufs := make([][][]byte, maxClients)
	for c := range bufs {
		bufs[c] = [][]byte{make([]byte, size)}
	}
	return keys, bufs, func() {
		if err := deleteRange(ctx, ns, 0, uint64(pages)); err != nil {
			b.Error(err)
		}
	}
}

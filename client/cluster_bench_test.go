package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

// benchDescriptor has 256 KiB pages (explicit size for an opaque layout).
var benchDescriptor = namespace.Descriptor{Tenant: "bench", Model: "m", ModelRevision: "r", Engine: "bench",
	DType: "bf16", PageTokens: 16, PageBytes: 256 << 10}

func openBench(b *testing.B, nodes []*clusterNode, d namespace.Descriptor, pages int) (*client.Namespace, []namespace.Key) {
	b.Helper()
	ctx := context.Background()
	ns, err := dialWith(b, nodes[0].Addr(), client.Options{}).Open(ctx, d)
	if err != nil {
		b.Fatal(err)
	}
	keys := ns.PageKeys(tokens(16*pages, 5))
	data := make([][]byte, len(keys))
	for i := range data {
		data[i] = make([]byte, ns.PageBytes())
		data[i][0] = byte(i)
	}
	if _, err := ns.Put(ctx, client.ChainPages(keys, data)); err != nil {
		b.Fatal(err)
	}
	return ns, keys
}

// BenchmarkClusterGet is aggregate get throughput of 256 KiB pages (4 per
// call, 8 concurrent callers) over in-process clusters of 1, 2 and 3
// nodes. On a 2-core machine the nodes, the client and the copies share two
// cores, so more nodes add coordination, not capacity: the figure shows
// the routing overhead, not scale-out.
func BenchmarkClusterGet(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := startCluster(b, n)
			ns, keys := openBench(b, nodes, benchDescriptor, 128)
			const callers, batch = 8, 4
			b.SetBytes(int64(batch * ns.PageBytes()))
			b.ResetTimer()
			var next sync.Mutex
			i := 0
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					bufs := make([][]byte, batch)
					for j := range bufs {
						bufs[j] = make([]byte, ns.PageBytes())
					}
					for {
						next.Lock()
						if i >= b.N {
							next.Unlock()
							return
						}
						start := (i * batch) % (len(keys) - batch)
						i++
						next.Unlock()
						found, err := ns.Get(context.Background(), keys[start:start+batch], bufs, nil)
						if err != nil || !found[0] {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// BenchmarkClusterLookup1000 is the latency of a 1,000-page lookup over 3
// in-process nodes (each node answers its share in parallel).
func BenchmarkClusterLookup1000(b *testing.B) {
	nodes := startCluster(b, 3)
	ns, keys := openBench(b, nodes, llama(), 1000) // 16 KiB pages: all 1,000 fit
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		lr, err := ns.Lookup(context.Background(), keys, false, 0)
		if err != nil || lr.HitPrefix != len(keys) {
			b.Fatal(err, lr.HitPrefix)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

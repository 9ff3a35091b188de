package benchmarks

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
)

// shmPageSize is the page size of the shm acceptance bar: shm get of 256 KiB
// pages at 4 times Redis GET of the same values at the same concurrency.
// Compare in one run:
//
//	go test ./benchmarks/ -run '^$' -bench 'BenchmarkShmGet|BenchmarkRedisGet/page=256KiB' -benchtime 2000x
const shmPageSize = 256 << 10

// BenchmarkShmGet reads one page per operation through same-host shared
// memory (the client maps the node's arena), round-robin over workingSet
// bytes of pages, into a buffer each client reuses; every client has its
// own connection and mapping, as in BenchmarkRedisGet, warmed before the
// clock starts. lease=no: Gets without a lease, which the client serves
// from its location cache (one memcpy and the generation re-check, no
// round trip: client/shm_cache.go). lease=yes: every Get names a lease
// taken beforehand on all the pages, so it makes one control round trip on
// the node's Unix socket (the node checks the lease and locates the page)
// before the memcpy. verify=on also checks each page's CRC-32C
// (Options.ShmVerifyChecksums); verify=off relies on the generation
// re-check alone, the client's default.
func BenchmarkShmGet(b *testing.B) {
	n := startNode(b, hostBytes)
	for _, mode := range []struct {
		name          string
		verify, lease bool
	}{{"verify=off/lease=no", false, false}, {"verify=on/lease=no", true, false}, {"verify=off/lease=yes", false, true}} {
		verify := mode.verify
		b.Run(mode.name+"/page="+sizeLabel(shmPageSize), func(b *testing.B) {
			ctx := b.Context()
			cs := make([]*client.Client, maxClients)
			for i := range cs {
				c, err := client.Dial(ctx, n.Addr(), client.Options{ShmVerifyChecksums: verify})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				cs[i] = c
			}
			nss := openAll(ctx, b, cs, descriptor(shmPageSize))
			for i, c := range cs {
				if !c.ShmActive() {
					b.Fatalf("client %d is not using shared memory", i)
				}
			}
			keys, bufs, done := getWorkingSet(ctx, b, nss[0], shmPageSize)
			defer done()
			pages := len(keys)
			// Warm every client's mapping off the clock: the first copy
			// from a page of a fresh mapping takes a page fault per 4 KiB
			// (64 per page), once per client process and page; a serving
			// engine's client is long-lived.
			for c := range nss {
				for j := range keys {
					if _, err := nss[c].Get(ctx, keys[j:j+1], bufs[c], nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, clients := range clientCounts {
				b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
					var lease *client.Lease
					if mode.lease {
						lr, err := nss[0].Lookup(ctx, keys, true, time.Minute)
						if err != nil || lr.HitPrefix != pages {
							b.Fatalf("leasing the pages: hit prefix %d, %v", lr.HitPrefix, err)
						}
						lease = lr.Lease
						defer lease.Release(ctx)
					}
					b.SetBytes(shmPageSize)
					load{clients: clients, op: getPage(nss, keys, bufs, lease)}.run(b)
				})
			}
		})
	}
}

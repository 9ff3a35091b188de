package benchmarks

import (
	"context"
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

// BenchmarkShmPut publishes fresh pages through same-host shared memory:
// one operation is one Namespace.Put of batch pages (batch=1: one page per
// call, as strata-load puts), each client with its own connection and
// mapping; ns/page is the wall time per page, all clients together. As in
// BenchmarkPut, the pages are deleted after every putRound bytes with the
// timer stopped (no put waits on eviction), and the arena is warmed first
// through every client's mapping (no first-touch page faults). Compare
// with Redis in one run:
//
//	go test ./benchmarks/ -run '^$' -bench 'BenchmarkShmPut|BenchmarkRedisSet/page=256KiB' -benchtime 2000x
func BenchmarkShmPut(b *testing.B) {
	n := startNode(b, hostBytes)
	// Warming puts 64 MiB a call into fresh arena memory: more than the
	// default NodeTimeout allows on a slow shared machine.
	cs := dialClientsWith(b, n.Addr(), maxClients, client.Options{NodeTimeout: time.Minute})
	nsBySize(b, cs, []int{shmPageSize}, func(b *testing.B, size int, nss []*client.Namespace) {
		for i, c := range cs {
			if !c.ShmActive() {
				b.Fatalf("client %d is not using shared memory", i)
			}
		}
		ctx := b.Context()
		data := randomBytes(size, 1)
		perRound := putRound / size
		// Every client warms its own mapping of the arena: the first write
		// of a fresh mapping to a page of the arena takes a page fault per
		// 4 KiB (64 per page), once per client process and page, which
		// costs more CPU than the copy itself; a serving engine's client
		// is long-lived, and has written the arena's slots before.
		for _, ns := range nss {
			if err := warm(ctx, ns, uint64(perRound), data); err != nil {
				b.Fatal(err)
			}
		}
		next := uint64(perRound) // page numbers are never reused
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
				byClients(b, "clients", size*batch, func(b *testing.B, clients int) {
					base := next
					next += uint64(b.N * batch)
					load{clients: clients, round: max(1, perRound/batch),
						op: func(ctx context.Context, c, i int) error {
							return putBatch(ctx, nss[c], base+uint64(i*batch), batch, data)
						},
						between: func(ctx context.Context, from, to int) error {
							return deleteRange(ctx, nss[0], base+uint64(from*batch), base+uint64(to*batch))
						},
					}.run(b)
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/page")
				})
			})
		}
	})
}

// putBatch publishes pages numbered [from, from+k) of ns, all holding
// data, in one Put, and fails unless each is committed.
func putBatch(ctx context.Context, ns *client.Namespace, from uint64, k int, data []byte) error {
	pages := make([]client.Page, k)
	for j := range pages {
		pages[j] = client.Page{Key: pageKey(ns.ID(), from+uint64(j)), Data: data}
	}
	res, err := ns.Put(ctx, pages)
	if err != nil {
		return err
	}
	for j, r := range res {
		if r.Status != client.Committed {
			return fmt.Errorf("page %d: %v %s", from+uint64(j), r.Status, r.Reason)
		}
	}
	return nil
}

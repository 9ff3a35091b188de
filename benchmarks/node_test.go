package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

// BenchmarkPut publishes one fresh page per operation through the client's
// two-phase put (Reserve, Write stream, Commit: three RPCs). After every
// putRound bytes the pages are deleted with the timer stopped, so the host
// tier never fills and no put waits on eviction. The arena is warmed first
// (one round put and deleted), so first-touch page faults are not measured
// either.
func BenchmarkPut(b *testing.B) {
	benchPut(b, func(_ *testing.B, _ string, nss []*client.Namespace) putFunc {
		return func(ctx context.Context, c int, key namespace.Key, data []byte) error {
			return putOne(ctx, nss[c], key, data)
		}
	})
}

// putFunc publishes one page as client c.
type putFunc func(ctx context.Context, c int, key namespace.Key, data []byte) error

// benchPut runs the put sub-benchmarks with the put that newPut makes for
// each page size: nss[c] is client c's namespace on the node at addr.
func benchPut(b *testing.B, newPut func(b *testing.B, addr string, nss []*client.Namespace) putFunc) {
	n := startNode(b, hostBytes)
	cs := dialClients(b, n.Addr(), maxClients)
	nsBySize(b, cs, pageSizes, func(b *testing.B, size int, nss []*client.Namespace) {
		ctx := b.Context()
		put := newPut(b, n.Addr(), nss)
		data := randomBytes(size, 1)
		perRound := putRound / size
		if err := warm(ctx, nss[0], uint64(perRound), data); err != nil {
			b.Fatal(err)
		}
		next := uint64(perRound) // page numbers are never reused
		byClients(b, "clients", size, func(b *testing.B, clients int) {
			base := next
			next += uint64(b.N)
			load{clients: clients, round: perRound,
				op: func(ctx context.Context, c, i int) error {
					return put(ctx, c, pageKey(nss[c].ID(), base+uint64(i)), data)
				},
				between: func(ctx context.Context, from, to int) error {
					return deleteRange(ctx, nss[0], base+uint64(from), base+uint64(to))
				},
			}.run(b)
		})
	})
}

// putOne publishes one page and fails unless it is committed.
func putOne(ctx context.Context, ns *client.Namespace, key namespace.Key, data []byte) error {
	res, err := ns.Put(ctx, []client.Page{{Key: key, Data: data}})
	if err != nil {
		return err
	}
	if res[0].Status != client.Committed {
		return fmt.Errorf("page %x: %v %s", key[:6], res[0].Status, res[0].Reason)
	}
	return nil
}

// warm puts and deletes pages [0, k) of ns, so that the arena memory a
// round of puts uses is committed before the clock starts.
func warm(ctx context.Context, ns *client.Namespace, k uint64, data []byte) error {
	if err := putRange(ctx, ns, 0, k, data); err != nil {
		return err
	}
	return deleteRange(ctx, ns, 0, k)
}

// BenchmarkGet reads one page per operation, without a lease, round-robin
// over workingSet bytes of pages published beforehand, into a buffer each
// client reuses; the client verifies every page's checksum.
func BenchmarkGet(b *testing.B) {
	n := startNode(b, hostBytes)
	cs := dialClients(b, n.Addr(), maxClients)
	nsBySize(b, cs, pageSizes, func(b *testing.B, size int, nss []*client.Namespace) {
		keys, bufs, done := getWorkingSet(b.Context(), b, nss[0], size)
		defer done()
		byClients(b, "clients", size, func(b *testing.B, clients int) {
			load{clients: clients, op: getPage(nss, keys, bufs, nil)}.run(b)
		})
	})
}

// Lookup benchmark shape: one prompt of lookupKeys present pages of
// lookupPageBytes; leases are released every leaseRound lookups with the
// timer stopped (the store caps a tenant at 4096 live leases).
const (
	lookupKeys      = 1000
	lookupPageBytes = 4 << 10
	leaseRound      = 1024
)

// BenchmarkLookup looks up a lookupKeys-page prompt whose pages are all
// present, without and with a lease on the hit prefix. The lease variant
// measures the Lookup call alone; releasing happens off the clock.
func BenchmarkLookup(b *testing.B) {
	n := startNode(b, hostBytes)
	ctx := b.Context()
	nss := openAll(ctx, b, dialClients(b, n.Addr(), maxClients), descriptor(lookupPageBytes))
	keys := promptKeys(ctx, b, nss[0], lookupKeys)
	for _, lease := range []bool{false, true} {
		for _, clients := range clientCounts {
			b.Run(fmt.Sprintf("keys=%d/lease=%t/clients=%d", lookupKeys, lease, clients), func(b *testing.B) {
				leases := make([]*client.Lease, b.N)
				l := load{clients: clients, round: leaseRound, op: func(ctx context.Context, c, i int) error {
					lr, err := nss[c].Lookup(ctx, keys, lease, 0)
					if err != nil {
						return err
					}
					if lr.HitPrefix != len(keys) || lease != (lr.Lease != nil) {
						return fmt.Errorf("hit prefix %d of %d, lease %v", lr.HitPrefix, len(keys), lr.Lease)
					}
					leases[i] = lr.Lease
					return nil
				}}
				if lease {
					l.between = func(ctx context.Context, from, to int) error {
						return releaseAll(ctx, leases[from:to], clients)
					}
				}
				l.run(b)
			})
		}
	}
}

// promptKeys publishes a prompt of k pages (a real token chain) and returns
// its keys.
func promptKeys(ctx context.Context, tb testing.TB, ns *client.Namespace, k int) []namespace.Key {
	tb.Helper()
	tokens := make([]uint32, k*ns.PageTokens())
	for i := range tokens {
		tokens[i] = uint32(i*7919) % 128000
	}
	keys := ns.PageKeys(tokens)
	data := make([][]byte, len(keys))
	page := randomBytes(ns.PageBytes(), 3)
	for i := range data {
		data[i] = page
	}
	res, err := ns.Put(ctx, client.ChainPages(keys, data))
	if err != nil {
		tb.Fatalf("publishing the prompt: %v", err)
	}
	for i, r := range res {
		if !r.Status.Stored() {
			tb.Fatalf("prompt page %d: %v %s", i, r.Status, r.Reason)
		}
	}
	return keys
}

// releaseAll releases leases on up to workers goroutines.
func releaseAll(ctx context.Context, leases []*client.Lease, workers int) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(leases); i += workers {
				if err := leases[i].Release(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

//go:build linux

package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testseed"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

var (
	shmStressFor  = flag.Duration("shm.stress", 2*time.Second, "how long TestShmStress runs")
	shmStressSeed = flag.Uint64("shm.seed", 0, "seed of TestShmStress (0: from the clock)")
)

// versionedPage is version v of the page of key k: v, then bytes drawn from
// (k, v). Any other content (a torn copy, another key's or version's bytes)
// fails checkPage.
func versionedPage(k namespace.Key, v uint64, size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b, v)
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(k[:]), v))
	for i := 8; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b
}

// TestShmStress races shm readers against writers that delete pages and
// publish new versions of them into a small arena, so extents are freed and
// reused by other pages while readers copy: every page a reader gets must be
// exactly a version that was put for its key (a raced copy is a miss).
// Bounded by -shm.stress; reproduce with -shm.seed.
func TestShmStress(t *testing.T) {
	seed := testseed.Choose(t, *shmStressSeed, "shm.seed")
	n, _ := shmNode(t, func(c *node.Config) { c.HostBytes = 2 << 20 }) // 128 pages of 16 KiB
	ctx := ctxT(t)
	c, ns := openShm(t, n)
	// A second client reads too: the writer's deletes do not clear its
	// location cache, so its cached copies race reuse as well.
	c2, ns2 := openShm(t, n)
	keys := ns.PageKeys(tokens(16*192, uint32(seed))) // 1.5 times the arena
	var put sync.Map                                  // [32+8]byte: key and version put
	var version atomic.Uint64
	var gets, hits, puts, committed atomic.Int64
	errs := make(chan error, 16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[rng.IntN(len(keys))]
				v := version.Add(1)
				var id [40]byte
				copy(id[:], k[:])
				binary.LittleEndian.PutUint64(id[32:], v)
				put.Store(id, true)
				if _, err := ns.Delete(ctx, []namespace.Key{k}); err != nil {
					errs <- fmt.Errorf("delete: %w", err)
					return
				}
				res, err := ns.Put(ctx, []client.Page{{Key: k, Data: versionedPage(k, v, ns.PageBytes())}})
				if err != nil {
					errs <- fmt.Errorf("put: %w", err)
					return
				}
				puts.Add(1)
				if res[0].Status == client.Committed {
					committed.Add(1)
				}
			}
		})
	}
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(100+r)))
			rns := []*client.Namespace{ns, ns2}[r%2]
			bufs := make([][]byte, 8)
			for i := range bufs {
				bufs[i] = make([]byte, ns.PageBytes())
			}
			batch := make([]namespace.Key, len(bufs))
			for {
				select {
				case <-stop:
					return
				default:
				}
				batch := batch[:len(bufs)]
				if rng.IntN(2) == 0 {
					batch = batch[:1] // single-page gets: served from the cache when it knows them
				}
				for i := range batch {
					batch[i] = keys[rng.IntN(len(keys))]
				}
				found, err := rns.Get(ctx, batch, bufs[:len(batch)], nil)
				if err != nil {
					errs <- fmt.Errorf("get: %w", err)
					return
				}
				gets.Add(1)
				for i, ok := range found {
					if !ok {
						continue
					}
					hits.Add(1)
					v := binary.LittleEndian.Uint64(bufs[i])
					var id [40]byte
					copy(id[:], batch[i][:])
					binary.LittleEndian.PutUint64(id[32:], v)
					if _, ok := put.Load(id); !ok || !bytes.Equal(bufs[i], versionedPage(batch[i], v, len(bufs[i]))) {
						errs <- fmt.Errorf("key %x: got bytes that are no version put (version field %d, put %v)", batch[i][:6], v, ok)
						return
					}
				}
			}
		})
	}
	select {
	case <-time.After(*shmStressFor):
	case err := <-errs:
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d gets (%d pages found), %d puts (%d committed)", gets.Load(), hits.Load(), puts.Load(), committed.Load())
	if gets.Load() == 0 || hits.Load() == 0 || committed.Load() == 0 {
		t.Fatal("the stress did not exercise reads and writes")
	}
	if !c.ShmActive() || !c2.ShmActive() {
		t.Fatal("a session broke: the reads were not all through shared memory")
	}
}

var _ = context.Background

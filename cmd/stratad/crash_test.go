package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/corrupt"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ssdDescriptor has 64 KiB pages.
var ssdDescriptor = namespace.Descriptor{Tenant: "crash", Model: "m", ModelRevision: "r", Engine: "test",
	DType: "bf16", PageTokens: 16, NumLayers: 4, NumKVHeads: 4, HeadDim: 64}

// startSSDNode runs stratad (built once; the test is skipped in -short
// mode) with an SSD tier in data.
func startSSDNode(t *testing.T, data string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	args := append([]string{"--tiers", "ssd", "--ssd-bytes", "256MiB"}, extra...)
	return startStratad(t, buildStratad(t), data, args...)
}

// adminClient is the admin service of the node at addr; the connection
// closes with the test.
func adminClient(t *testing.T, addr string) pb.AdminClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAdminClient(conn)
}

func nodeInfo(t *testing.T, addr string) *pb.NodeInfoResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := adminClient(t, addr).NodeInfo(ctx, &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestKillDuringPuts: kill -9 stratad while writers put pages onto the SSD
// tier; after a restart every acknowledged page is served byte-exact, no
// page is served with other bytes, and no reservation survives.
func TestKillDuringPuts(t *testing.T) {
	data := t.TempDir()
	cmd, addr := startSSDNode(t, data)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		acked []namespace.Key
		tried []namespace.Key
	)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			c, err := client.Dial(ctx, addr, client.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			ns, err := c.Open(ctx, ssdDescriptor)
			if err != nil {
				t.Error(err)
				return
			}
			for seq := uint32(0); ; seq++ {
				toks := make([]uint32, 16*4)
				for i := range toks {
					toks[i] = uint32(w)<<24 | seq<<8 | uint32(i)
				}
				keys, data := chainOf(ns, toks)
				mu.Lock()
				tried = append(tried, keys...)
				mu.Unlock()
				res, err := ns.Put(ctx, client.ChainPages(keys, data))
				if err != nil || c.AllFailed() > 0 {
					return // the node died (its pages are misses since issue 22, not an error)
				}
				mu.Lock()
				for i, r := range res {
					if r.Status == client.Committed {
						acked = append(acked, keys[i])
					}
				}
				mu.Unlock()
			}
		})
	}
	// Let the load run, then kill without warning.
	n := 0
	if !poll.Within(30*time.Second, 20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n = len(acked)
		return n >= 200
	}) {
		t.Fatalf("only %d pages acknowledged in 30s", n)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wg.Wait()
	t.Logf("%d pages acknowledged, %d attempted before the kill", len(acked), len(tried))

	_, addr = startSSDNode(t, data)
	info := nodeInfo(t, addr)
	if info.GetReservations() != 0 {
		t.Fatalf("%d reservations after restart", info.GetReservations())
	}
	_, ns := dialOpen(t, ctx, addr, client.Options{}, 0, ssdDescriptor)
	check := func(keys []namespace.Key, mustHave bool) int {
		served := 0
		for start := 0; start < len(keys); start += 256 {
			batch := keys[start:min(len(keys), start+256)]
			bufs := pageBufs(ns, len(batch))
			found, err := ns.Get(ctx, batch, bufs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range batch {
				switch {
				case found[i] && !exact(k, bufs[i]):
					t.Fatalf("page %x served with other bytes", k[:6])
				case found[i]:
					served++
				case mustHave:
					t.Fatalf("acknowledged page %x lost", k[:6])
				}
			}
		}
		return served
	}
	check(acked, true)
	served := check(tried, false)
	t.Logf("after restart: %d of %d attempted pages served, all byte-exact", served, len(tried))
	if rec := info.GetRecovery(); len(rec) != 1 || rec[0].GetRecovered() < uint64(len(acked)) {
		t.Fatalf("recovery report %v, want at least %d pages", rec, len(acked))
	}
}

// findAll returns the offsets of pattern in the file.
func findAll(t *testing.T, path string, pattern []byte) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := 0; ; {
		i := bytes.Index(b[off:], pattern)
		if i < 0 {
			return out
		}
		out = append(out, int64(off+i))
		off += i + 1
	}
}

// TestCorruptSSD: a flipped payload byte, a flipped header byte and a
// truncated slot file each turn the pages they hit into misses, counted in
// the recovery report; every other page keeps serving byte-exact.
func TestCorruptSSD(t *testing.T) {
	data := t.TempDir()
	cmd, addr := startSSDNode(t, data)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, ns := dialOpen(t, ctx, addr, client.Options{}, 0, ssdDescriptor)
	toks := make([]uint32, 16*40)
	for i := range toks {
		toks[i] = uint32(i * 3)
	}
	keys, pages := chainOf(ns, toks)
	if _, err := ns.Put(ctx, client.ChainPages(keys, pages)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	files, _ := filepath.Glob(filepath.Join(data, "ssd", "*.slots"))
	if len(files) == 0 {
		t.Fatal("no slot files")
	}
	locate := func(pattern []byte) (string, int64) {
		for _, f := range files {
			if offs := findAll(t, f, pattern); len(offs) > 0 {
				return f, offs[0]
			}
		}
		t.Fatalf("pattern not found in the slot files")
		return "", 0
	}
	// Payload of page 5: flip a byte in its middle.
	f, off := locate(pages[5][:64])
	corrupt.Flip(t, f, off+int64(len(pages[5])/2), 0x5a)
	// Header of page 9: flip a byte of the key recorded there.
	f, off = locate(keys[9][:])
	corrupt.Flip(t, f, off+3, 0x5a)
	// Truncate the file inside the payload of the last page written.
	last := len(keys) - 1
	f, off = locate(pages[last][:64])
	if err := os.Truncate(f, off+100); err != nil {
		t.Fatal(err)
	}

	_, addr = startSSDNode(t, data)
	info := nodeInfo(t, addr)
	if rec := info.GetRecovery(); len(rec) != 1 || rec[0].GetDropped() < 2 {
		t.Fatalf("recovery report %v: want the corrupt slots counted as dropped", rec)
	}
	_, ns = dialOpen(t, ctx, addr, client.Options{}, 0, ssdDescriptor)
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, ns.PageBytes())
	}
	found, err := ns.Get(ctx, keys, bufs, nil)
	if err != nil && !errors.Is(err, client.ErrChecksum) {
		t.Fatal(err)
	}
	for i := range keys {
		bad := i == 5 || i == 9 || i == last
		switch {
		case found[i] && bad:
			t.Errorf("corrupted page %d served", i)
		case found[i] && !bytes.Equal(bufs[i], pages[i]):
			t.Errorf("page %d served with wrong bytes", i)
		case !found[i] && !bad:
			t.Errorf("intact page %d lost", i)
		}
	}
}

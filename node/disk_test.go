//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/scrape"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted
// when the test ends; it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs for a full file system (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func itoa(n int64) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// fill writes a file into dir until its file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return p
		}
	}
}

func tierStats(t *testing.T, addr string, tier pb.Tier) *pb.TierStats {
	t.Helper()
	cc := testnode.Dial(t, addr)
	info, err := pb.NewAdminClient(cc).NodeInfo(context.Background(), &pb.NodeInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range info.GetTiers() {
		if ts.GetTier() == tier {
			return ts
		}
	}
	t.Fatalf("no %v tier", tier)
	return nil
}

// TestFullDisk: a node started with its SSD directory on a full file
// system says so at once (NodeInfo, which `strata node ls` shows, and the
// strata_tier_fault metric), its SSD capacity is what its files hold,
// puts keep landing in the host tier and read back exact, and once the
// file system has room the fault ends.
func TestFullDisk(t *testing.T) {
	dir := mountTmpfs(t, 16<<20)
	filler := fill(t, dir)
	n := testnode.Start(t, node.Config{Tiers: []string{"host", "ssd"}, HostBytes: 4 << 20,
		SSDBytes: 8 << 20, SSDDir: dir})
	started := time.Now()
	ssd := tierStats(t, n.Addr(), pb.Tier_TIER_SSD)
	if ssd.GetFault() != "disk-full" || ssd.GetCapacityBytes() != 0 {
		t.Fatalf("ssd tier of a node started on a full disk: %v, want fault disk-full and capacity 0", ssd)
	}
	if v := scrape.Sum(scrape.Metrics(t, n.AdminAddr()), "strata_tier_fault", `tier="ssd"`, `fault="disk-full"`); v != 1 {
		t.Fatalf("strata_tier_fault{tier=ssd,fault=disk-full} = %v", v)
	}
	t.Logf("full disk reported %v after Start returned", time.Since(started).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, ns := openNS(t, n.Addr(), client.Options{}, desc)
	put := func(from, count int) int {
		keys, pages := chain(ns, from, count)
		committed := 0
		for i := 0; i < len(pages); i += 64 {
			res, err := ns.Put(ctx, pages[i:min(len(pages), i+64)])
			if err != nil {
				t.Fatalf("put on a full disk: %v", err)
			}
			for _, r := range res {
				if r.Status == client.Committed {
					committed++
				}
			}
		}
		// The newest pages are on the host tier and read back exact.
		last := keys[len(keys)-8:]
		bufs := make([][]byte, len(last))
		for j := range bufs {
			bufs[j] = make([]byte, ns.PageBytes())
		}
		ok, err := ns.Get(ctx, last, bufs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, k := range last {
			if !ok[j] || !bytes.Equal(bufs[j], testnode.PageOf(k, ns.PageBytes())) {
				t.Fatalf("newest page %d not served exact on a full disk", j)
			}
		}
		return committed
	}
	got := put(0, 512) // 8 MiB: twice the host tier
	t.Logf("full disk: %d of 512 pages committed", got)
	if got != 512 {
		t.Fatalf("%d of 512 puts committed with the SSD file system full, want every one (on the host tier)", got)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	from := 512
	poll.Until(t, 20*time.Second, 100*time.Millisecond, "the fault ending once the file system has room", func() bool {
		put(from, 64)
		from += 64
		return tierStats(t, n.Addr(), pb.Tier_TIER_SSD).GetFault() == "ok"
	})
	if ssd := tierStats(t, n.Addr(), pb.Tier_TIER_SSD); ssd.GetCapacityBytes() != 8<<20 {
		t.Fatalf("ssd tier after the fault: %v, want its configured capacity back", ssd)
	}
}

package store

import (
	"fmt"
	"testing"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// BenchmarkDemotion measures host→SSD demotion (verified copy: checksum of
// the source, write, read-back checksum, seal) with the real tiers, per
// page size and SSD sync mode. SetBytes makes -bench report MB/s.
func BenchmarkDemotion(b *testing.B) {
	for _, size := range []int64{256 << 10, 2 << 20} {
		for _, sync := range []tiers.SyncMode{tiers.SyncNone, tiers.SyncEveryPage} {
			b.Run(fmt.Sprintf("page=%dKiB/sync=%s", size>>10, sync), func(b *testing.B) {
				host, err := tiers.NewHost(tiers.HostConfig{Capacity: 256 << 20})
				if err != nil {
					b.Fatal(err)
				}
				ssd, err := tiers.NewSSD(tiers.SSDConfig{Dir: b.TempDir(), Capacity: 1 << 30, Sync: sync})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ssd.Recover(func(tiers.Extent, tiers.PageMeta) error { return nil }); err != nil {
					b.Fatal(err)
				}
				s, err := New(Config{Tiers: []tiers.Tier{host, ssd}})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { s.Close(); host.Close(); ssd.Close() }()
				ns := Namespace{ID: namespace.ID{7}, Tenant: "bench", PageBytes: size, Checksum: namespace.CRC32C}
				if err := s.AddNamespace(ns); err != nil {
					b.Fatal(err)
				}
				page := make([]byte, size)
				for i := range page {
					page[i] = byte(i * 7)
				}
				sum := ns.Checksum.Sum(page)
				pages := int(160 << 20 / size) // below the mover's watermark: only the benchmark demotes
				b.SetBytes(size)
				b.ResetTimer()
				for done := 0; done < b.N; {
					b.StopTimer()
					for i := range min(pages, b.N-done) {
						var k namespace.Key
						copy(k[:], fmt.Sprintf("%d-%d", done, i))
						res, err := s.Publisher().Reserve(ns.ID, []PageSpec{{Key: k, Size: size}}, 0)
						if err != nil || res[0].Status != Reserved {
							b.Fatal(err, res)
						}
						if err := s.Publisher().Write(ns.ID, res[0].WriteID, 0, page); err != nil {
							b.Fatal(err)
						}
						if st, _ := s.Publisher().Commit(ns.ID, res[0].WriteID, size, sum); st != CommitCommitted {
							b.Fatal(st)
						}
					}
					b.StartTimer()
					for range min(pages, b.N-done) {
						if !s.demoteOne(0) {
							b.Fatal("nothing to demote")
						}
						done++
					}
				}
			})
		}
	}
}

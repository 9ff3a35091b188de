package benchmarks

import (
	"context"
	"testing"
	"time"

	loadgen "github.com/stratakv/strata/benchmarks/load"
)

// BenchmarkRedisGet is the reference a strata get is compared with: per
// operation a client sends a RESP GET for one page-sized string value and
// reads the value into a buffer it reuses, round-robin over workingSet bytes
// of values stored beforehand, each client over its own TCP connection to a
// redis-server on 127.0.0.1 (started by the benchmark, persistence off) with
// one request in flight, as the strata clients have. cpu-µs/op counts this
// process and the redis-server process together (server-cpu-µs/op is
// redis-server's share).
func BenchmarkRedisGet(b *testing.B) {
	srv := startRedis(b)
	conns := dialRedis(b, srv, maxClients)
	bySize(b, pageSizes, func(b *testing.B, size int) {
		pages := workingSet / size
		if err := loadgen.PopulateRedis(conns[0], pages, randomBytes(size, 2)); err != nil {
			b.Fatal(err)
		}
		keys, bufs := loadgen.RedisKeys(pages), pageBuffers(size)
		byClients(b, "clients", size, func(b *testing.B, clients int) {
			runWithServer(b, load{clients: clients, op: func(_ context.Context, c, i int) error {
				return conns[c].Get(keys[i%pages], bufs[c])
			}}, srv.CPUTime)
		})
	})
}

// BenchmarkRedisSet writes one page-sized string value per operation with a
// RESP SET, round-robin over the workingSet bytes of keys stored
// beforehand: every SET replaces a value of the same size, so Redis memory
// stays at about workingSet and nothing is ever evicted (strata's Put writes
// fresh keys and deletes them off the clock instead; both measure puts that
// never wait on eviction). Connections, server and CPU accounting as in
// BenchmarkRedisGet.
func BenchmarkRedisSet(b *testing.B) {
	srv := startRedis(b)
	conns := dialRedis(b, srv, maxClients)
	bySize(b, pageSizes, func(b *testing.B, size int) {
		pages, data := workingSet/size, randomBytes(size, 1)
		if err := loadgen.PopulateRedis(conns[0], pages, data); err != nil {
			b.Fatal(err)
		}
		keys := loadgen.RedisKeys(pages)
		byClients(b, "clients", size, func(b *testing.B, clients int) {
			runWithServer(b, load{clients: clients, op: func(_ context.Context, c, i int) error {
				return conns[c].Set(keys[i%pages], data)
			}}, srv.CPUTime)
		})
	})
}

// runWithServer is load.run for a workload whose server runs in another
// process: cpu-µs/op adds serverCPU's growth over the run to this
// process's CPU time, and server-cpu-µs/op reports that share alone. l must
// not use between.
func runWithServer(b *testing.B, l load, serverCPU func() time.Duration) {
	if l.between != nil {
		b.Fatal("runWithServer: between is not supported")
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	c0, s0 := loadgen.CPUTime(), serverCPU()
	err := l.runRound(b.Context(), 0, b.N, lat)
	cpu, srv := loadgen.CPUTime()-c0, serverCPU()-s0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	reportLatency(b, lat)
	perOp := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Microsecond) }
	b.ReportMetric(perOp(cpu+srv), "cpu-µs/op")
	b.ReportMetric(perOp(srv), "server-cpu-µs/op")
}

package benchmarks

import (
	"errors"
	"net"
	"testing"

	loadgen "github.com/stratakv/strata/benchmarks/load"
)

// startRedis starts redis-server on a free loopback port, persistence off
// (loadgen.StartRedis), and kills it with tb. It skips the benchmark if
// redis-server is not installed.
func startRedis(tb testing.TB) *loadgen.RedisServer {
	tb.Helper()
	s, err := loadgen.StartRedis(tb.Context(), tb.TempDir())
	if errors.Is(err, loadgen.ErrNoRedis) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// dialRedis opens k connections to s, each warmed by reading redisWarmBytes
// (kernel buffer autotuning, as BenchmarkLoopbackTCP warms its
// connections), and closes them with tb.
func dialRedis(tb testing.TB, s *loadgen.RedisServer, k int) []*loadgen.RedisConn {
	tb.Helper()
	const redisWarmBytes = 64 << 20
	warm := randomBytes(2<<20, 6)
	conns := make([]*loadgen.RedisConn, k)
	for i := range conns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		conns[i] = loadgen.NewRedisConn(c)
	}
	if err := conns[0].Set("warm", warm); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, len(warm))
	for _, c := range conns {
		for range redisWarmBytes / len(warm) {
			if err := c.Get("warm", buf); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return conns
}

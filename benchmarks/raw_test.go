package benchmarks

import (
	"testing"

	"github.com/stratakv/strata/client"
)

// BenchmarkRawGet is BenchmarkGet over the node's raw tcp data plane
// (client/raw.go) instead of gRPC: one Read per operation, the page's bytes
// read from the socket into the client's buffer and CRC-32C verified.
// Compare in one run with gRPC and the loopback TCP limit:
//
//	go test ./benchmarks/ -run '^$' -bench 'BenchmarkRawGet|BenchmarkGet/page=256KiB|BenchmarkLoopbackTCP/page=256KiB' -benchtime 2000x
func BenchmarkRawGet(b *testing.B) {
	n := startNode(b, hostBytes)
	cs := dialClientsWith(b, n.Addr(), maxClients, client.Options{NoShm: true})
	nsBySize(b, cs, []int{shmPageSize}, func(b *testing.B, size int, nss []*client.Namespace) {
		for i, c := range cs {
			if !c.RawActive() {
				b.Fatalf("client %d is not using the raw data plane", i)
			}
		}
		keys, bufs, done := getWorkingSet(b.Context(), b, nss[0], size)
		defer done()
		byClients(b, "clients", size, func(b *testing.B, clients int) {
			b.ReportAllocs()
			load{clients: clients, op: getPage(nss, keys, bufs, nil)}.run(b)
		})
	})
}

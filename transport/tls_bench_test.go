package transport

import (
	"testing"

	"github.com/stratakv/strata/proto/frame"
)

// BenchmarkTLSPage sends 256 KiB Page frames over a loopback TLS
// connection (UnderTLS at both ends, as node and client make it) and reads
// them with RecvPage: the TLS'd get's transport cost, sender and receiver
// in this process (go test -cpuprofile shows where it goes).
func BenchmarkTLSPage(b *testing.B) {
	client, server, _ := tlsPair(b)
	page := make([]byte, 256<<10)
	buf := make([]byte, len(page))
	errc := make(chan error, 1)
	b.SetBytes(int64(len(page)))
	b.ResetTimer()
	go func() {
		for range b.N {
			if err := server.SendFrames(Frame{ID: 1, Msg: &frame.Page{Found: true, Checksum: []byte{1, 2, 3, 4}, Data: page}}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range b.N {
		if _, _, err := client.RecvPage(func(*frame.Page, int) ([]byte, error) { return buf, nil }, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

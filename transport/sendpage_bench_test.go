//go:build linux

package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratakv/strata/tiers"
)

// BenchmarkPageSend measures the candidates for sending a get's page from
// the host arena to a TCP socket on loopback (issue 42, "Gets without a
// copy"): a write of the mapped bytes (what the node does: the kernel
// copies them into the socket), or sendfile(2) from the arena's memfd
// (the socket references the arena's pages; the reader's copy is then the
// only one). One operation: an 8-byte request, a 256 KiB page back, read
// into a reused buffer; conns connections, each with a reader goroutine,
// over a 64 MiB arena round-robin. bytes/s is the throughput; compare the
// two at each conns.
//
//	go test -run '^$' -bench PageSend -benchtime 2s -count 3 ./transport
func BenchmarkPageSend(b *testing.B) {
	const page, pages = 256 << 10, 256
	h, err := tiers.NewHost(tiers.HostConfig{Capacity: page * pages, SlabSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	exts := make([]tiers.Extent, pages)
	for i := range exts {
		if exts[i], err = h.Alloc(page); err != nil {
			b.Fatal(err)
		}
		m := h.Bytes(exts[i])
		for j := range m {
			m[j] = byte(i + j)
		}
	}
	for _, how := range []string{"write", "sendfile"} {
		for _, conns := range []int{1, 8} {
			b.Run(fmt.Sprintf("how=%s/conns=%d", how, conns), func(b *testing.B) {
				pairs := make([][2]net.Conn, conns)
				var served sync.WaitGroup
				for c := range pairs {
					cl, sv := streamPair(b)
					pairs[c] = [2]net.Conn{cl.Net(), sv.Net()}
					srv := pairs[c][1]
					served.Go(func() { servePages(srv, h, exts, how == "sendfile") })
				}
				b.SetBytes(page)
				b.ResetTimer()
				var wg sync.WaitGroup
				per := (b.N + conns - 1) / conns
				for c := range pairs {
					cl := pairs[c][0]
					wg.Go(func() {
						buf, req := make([]byte, page), make([]byte, 8)
						for i := range per {
							binary.LittleEndian.PutUint64(req, uint64((c*31+i)%pages))
							if _, err := cl.Write(req); err != nil {
								b.Error(err)
								return
							}
							if _, err := io.ReadFull(cl, buf); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				for _, p := range pairs {
					p[0].Close()
				}
				served.Wait()
				for _, p := range pairs {
					p[1].Close()
				}
			})
		}
	}
}

// servePages answers each 8-byte request on c with the page it names,
// written from the mapping or sent from the arena's memfd, until c fails.
func servePages(c net.Conn, h *tiers.Host, exts []tiers.Extent, sendfile bool) {
	req := make([]byte, 8)
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return
	}
	for {
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		e := exts[binary.LittleEndian.Uint64(req)]
		if !sendfile {
			if _, err := c.Write(h.Bytes(e)); err != nil {
				return
			}
			continue
		}
		off, left := e.Off, int(e.Len)
		for left > 0 {
			var n int
			var serr error
			if err := rc.Write(func(fd uintptr) bool {
				n, serr = unix.Sendfile(int(fd), h.FD(), &off, left)
				return serr != unix.EAGAIN
			}); err != nil || serr != nil {
				return
			}
			left -= n
		}
	}
}

package transport

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stratakv/strata/internal/testing/testcerts"
	"github.com/stratakv/strata/proto/frame"
)

// countedConn counts the writes made on a connection.
type countedConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair is both ends of a loopback TLS connection, as Conns, the
// server's TCP connection counted under its UnderTLS.
func tlsPair(t testing.TB) (client, server *Conn, counted *countedConn) {
	t.Helper()
	ca := testcerts.New(t, "tls")
	pair := ca.Issue("node")
	cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	a, b := streamPair(t)
	counted = &countedConn{Conn: b.Net()}
	sc := tls.Server(UnderTLS(counted), &tls.Config{Certificates: []tls.Certificate{cert}})
	cc := tls.Client(UnderTLS(a.Net()), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() { done <- sc.Handshake() }()
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	client, server = NewStreamConn(cc, 0), NewStreamConn(sc, 0)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, counted
}

// TestTLSRecordsWrittenTogether: a TLS connection made over UnderTLS
// hands its handshake through, and a 640,000-byte page frame (40 records)
// reaches the other end intact in a write per tlsFlushBytes of records,
// not one per record; a small frame after it is one write.
func TestTLSRecordsWrittenTogether(t *testing.T) {
	client, server, counted := tlsPair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000)
	before := counted.writes.Load()
	errc := make(chan error, 1)
	go func() {
		errc <- server.SendFrames(Frame{ID: 3, Msg: &frame.Page{Index: 0, Found: true, Checksum: []byte{9}, Data: big}})
	}()
	buf := make([]byte, len(big))
	id, m, err := client.RecvPage(func(*frame.Page, int) ([]byte, error) { return buf, nil }, nil)
	if p, ok := m.(*frame.Page); err != nil || id != 3 || !ok || !bytes.Equal(p.Data, big) {
		t.Fatalf("page: id %d, %v", id, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	records := (len(big) + 16<<10 - 1) / (16 << 10)
	sealed := len(big) + records*(5+16+1) // header, tag and content type per record
	if got, most := counted.writes.Load()-before, int64(sealed/tlsFlushBytes+2); got > most {
		t.Errorf("a %d-byte page frame took %d writes, want at most %d (the records written together)", len(big), got, most)
	}
	before = counted.writes.Load()
	go func() { errc <- server.Send(4, &frame.AbortOK{Aborted: 2}) }()
	if id, m, err := client.Recv(); err != nil || id != 4 || m.(*frame.AbortOK).Aborted != 2 {
		t.Fatalf("small frame: %d %#v %v", id, m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := counted.writes.Load() - before; got != 1 {
		t.Errorf("a small frame took %d writes, want 1", got)
	}
}

package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testcerts"
	"github.com/stratakv/strata/internal/testnode"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// startTLS starts a node serving TLS with client certificates required
// (mTLS), its certificate from a CA made now.
func startTLS(t *testing.T) (*testnode.Node, *testcerts.CA) {
	t.Helper()
	ca := testcerts.New(t, "strata")
	nodeCert := ca.Issue("node")
	n := testnode.Start(t, node.Config{HostBytes: 64 << 20, ShmSocket: "off",
		TLSCert: nodeCert.Cert, TLSKey: nodeCert.Key, TLSCA: ca.CAFile, TLSClientAuth: true})
	return n, ca
}

// TestTLSNode: a node with TLS and client verification serves a client
// with the CA and a certificate of that CA on gRPC and on the raw plane,
// and refuses plaintext (gRPC and raw), a client certificate of another
// CA and a client with no certificate.
func TestTLSNode(t *testing.T) {
	n, ca := startTLS(t)
	good := ca.Issue("client")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, noRaw := range []bool{false, true} {
		c, err := client.Dial(ctx, n.Addr(), client.Options{CA: ca.CAFile, Cert: good.Cert, Key: good.Key, NoShm: true, NoRaw: noRaw})
		if err != nil {
			t.Fatal(err)
		}
		ns, err := c.Open(ctx, desc)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.RawActive(); got == noRaw {
			t.Fatalf("noRaw %v: the raw plane is active: %v", noRaw, got)
		}
		tokens := make([]uint32, 2*desc.PageTokens)
		tokens[0] = map[bool]uint32{false: 1, true: 2}[noRaw]
		keys := ns.PageKeys(tokens)
		pages := [][]byte{pageOf(keys[0], ns.PageBytes()), pageOf(keys[1], ns.PageBytes())}
		if _, err := ns.Put(ctx, client.ChainPages(keys, pages)); err != nil {
			t.Fatal(err)
		}
		bufs := [][]byte{make([]byte, ns.PageBytes()), make([]byte, ns.PageBytes())}
		found, err := ns.Get(ctx, keys, bufs, nil)
		if err != nil || !found[0] || !found[1] || !bytes.Equal(bufs[0], pages[0]) || !bytes.Equal(bufs[1], pages[1]) {
			t.Fatalf("noRaw %v: get over TLS: found %v, err %v", noRaw, found, err)
		}
		c.Close()
	}

	other := testcerts.New(t, "other").Issue("client")
	refused := map[string]client.Options{
		"plaintext":          {},
		"cert of other CA":   {CA: ca.CAFile, Cert: other.Cert, Key: other.Key},
		"no client cert":     {CA: ca.CAFile},
		"server of other CA": {CA: testcerts.New(t, "third").CAFile, Cert: good.Cert, Key: good.Key},
	}
	for name, o := range refused {
		o.NodeTimeout = 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := client.Dial(ctx, n.Addr(), o)
		if err == nil {
			_, err = c.Open(ctx, desc)
			c.Close()
		}
		cancel()
		if err == nil {
			t.Errorf("%s: a client was served", name)
		}
	}

	// The raw plane: a plaintext Hello gets no Welcome; a TLS one does.
	raw := n.RawAddr()
	if raw == "" {
		t.Fatal("the node serves no raw plane")
	}
	nc, err := net.DialTimeout("tcp", raw, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rawHello(nc); err == nil {
		t.Fatalf("a plaintext raw hello was answered %T", m)
	}
	cert, err := tls.LoadX509KeyPair(good.Cert, good.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := mustPool(t, ca.CAFile)
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", raw,
		&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rawHello(tc); err != nil {
		t.Fatalf("a TLS raw hello: %v", err)
	} else if _, ok := m.(*frame.Welcome); !ok {
		t.Fatalf("a TLS raw hello was answered %T, want a Welcome", m)
	}
}

// rawHello says hello on nc and reads the answer; it closes nc.
func rawHello(nc net.Conn) (frame.Message, error) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	c := transport.NewStreamConn(nc, 0)
	if err := c.Send(0, &frame.Hello{Version: frame.ProtocolVersion}); err != nil {
		return nil, err
	}
	_, m, err := c.Recv()
	return m, err
}

// TestTLSReload: a certificate replaced on disk is served from the next
// handshake on, without a restart.
func TestTLSReload(t *testing.T) {
	ca := testcerts.New(t, "first")
	first := ca.Issue("node")
	cfgDir := t.TempDir()
	cert, key := cfgDir+"/node.pem", cfgDir+"/node-key.pem"
	copyFile(t, first.Cert, cert)
	copyFile(t, first.Key, key)
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, ShmSocket: "off", TLSCert: cert, TLSKey: key})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(caFile string) error {
		c, err := client.Dial(ctx, n.Addr(), client.Options{CA: caFile, NoShm: true})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Open(ctx, desc)
		return err
	}
	if err := open(ca.CAFile); err != nil {
		t.Fatal(err)
	}
	second := testcerts.New(t, "second")
	next := second.Issue("node")
	copyFile(t, next.Cert, cert)
	copyFile(t, next.Key, key)
	if err := open(second.CAFile); err != nil {
		t.Fatalf("after the certificate changed: %v", err)
	}
	if err := open(ca.CAFile); err == nil {
		t.Fatal("the old certificate is still served")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// A new modification time even within the file system's granularity.
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

func mustPool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("no CA certificate")
	}
	return pool
}

package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testcerts"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/transport"
)

// The node's security: TLS and mTLS on gRPC and the raw plane, certificate
// reload, and tenants (tokens, quotas) from etcd.

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
		pages := testnode.PagesOf(keys, ns.PageBytes())
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

// page is the size of desc's pages.
const page = 16 << 10

// putTenants writes tenants into n's etcd and returns a registry client
// of it, closed when the test ends.
func putTenants(ctx context.Context, t *testing.T, n *testnode.Node, tenants ...registry.Tenant) *registry.Registry {
	t.Helper()
	reg, err := registry.Open(ctx, registry.Config{Endpoints: n.EtcdEndpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	for _, tn := range tenants {
		if err := reg.PutTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// TestTenantsFromEtcd: tenants recorded in etcd (hashed tokens, quotas)
// are in force on the node within a poll: a tenant at its byte quota has
// its further pages REJECTED (QUOTA) and cannot push another tenant's
// pages out, and a token revoked in etcd is refused, on gRPC and on the
// raw plane, within 5 s.
func TestTenantsFromEtcd(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	n := testnode.Start(t, node.Config{HostBytes: 2 << 20, ShmSocket: "off", NoCutoffFloor: true,
		AdminToken: "root", AuditLog: auditLog}) // 128 pages of 16 KiB
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := putTenants(ctx, t, n, registry.Tenant{Name: "acme", TokenSHA256: server.HashToken("tok-a"), Quota: registry.Quota{Bytes: 32 * page}},
		registry.Tenant{Name: "beta", TokenSHA256: server.HashToken("tok-b")})
	open := func(token, tenant string, noRaw bool) (*client.Client, *client.Namespace, error) {
		c, err := client.Dial(ctx, n.Addr(), client.Options{Token: token, NoRaw: noRaw})
		if err != nil {
			return nil, nil, err
		}
		d := desc
		d.Tenant = tenant
		ns, err := c.Open(ctx, d)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		t.Cleanup(func() { c.Close() })
		return c, ns, nil
	}
	var a *client.Namespace
	poll.NoError(t, 5*time.Second, 50*time.Millisecond, "a tenant put in etcd served", func() (err error) {
		_, a, err = open("tok-a", "acme", false)
		return err
	})
	_, b, err := open("tok-b", "beta", true)
	if err != nil {
		t.Fatal(err)
	}

	pagesOf := func(ns *client.Namespace, seed uint32, count int) []client.Page {
		tokens := make([]uint32, count*int(desc.PageTokens))
		for i := range tokens {
			tokens[i] = seed + uint32(i)
		}
		keys := ns.PageKeys(tokens)
		data := testnode.PagesOf(keys, ns.PageBytes())
		return client.ChainPages(keys, data)
	}
	bPages := pagesOf(b, 1<<20, 64)
	if res, err := b.Put(ctx, bPages); err != nil || committed(res) != 64 {
		t.Fatalf("beta's put: %d of 64 committed, %v", committed(res), err)
	}
	// acme puts 96 pages: 32 fit its quota, the rest are refused, and
	// none of beta's pages is pushed out (the tier has room for 128).
	res, _ := a.Put(ctx, pagesOf(a, 0, 96))
	if got := committed(res); got != 32 {
		t.Fatalf("acme at a 32-page quota committed %d of 96", got)
	}
	if res[32].Status != client.Rejected {
		t.Fatalf("the page past acme's quota: %v %q", res[32].Status, res[32].Reason)
	}
	t.Logf("past the quota: %v %q", res[32].Status, res[32].Reason)
	hit, err := b.Lookup(ctx, keysOf(bPages), false, 0)
	if err != nil || hit.HitPrefix != 64 {
		t.Fatalf("beta's pages after acme's puts: %d of 64, %v", hit.HitPrefix, err)
	}

	if err := reg.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if !poll.Within(5*time.Second, 20*time.Millisecond, func() bool {
		_, err = a.Lookup(ctx, keysOf(pagesOf(a, 0, 1)), false, 0)
		return errors.Is(err, client.ErrUnauthenticated)
	}) {
		t.Fatalf("a revoked token still works after 5s: %v", err)
	}
	t.Logf("revoked token refused %v after the delete", time.Since(revoked).Round(time.Millisecond))
	if _, _, err := open("tok-a", "acme", true); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("a new client with the revoked token: %v", err)
	}
	if _, err := b.Lookup(ctx, keysOf(bPages), false, 0); err != nil {
		t.Fatalf("beta after acme's revocation: %v", err)
	}

	// The audit log has the delete (who, what) and the revocation.
	if d, err := b.Delete(ctx, keysOf(bPages[63:])); err != nil || d != 1 {
		t.Fatalf("beta's delete: %d, %v", d, err)
	}
	log, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"who":"tenant:beta"`, `"op":"delete keys"`, `"deleted":1`, `"op":"tenant removed","tenant":"acme"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, log)
		}
	}
}

func committed(res []client.PutResult) int {
	n := 0
	for _, r := range res {
		if r.Status == client.Committed {
			n++
		}
	}
	return n
}

func keysOf(pages []client.Page) []namespace.Key {
	keys := make([]namespace.Key, len(pages))
	for i, p := range pages {
		keys[i] = p.Key
	}
	return keys
}

// TestReserveQuota: one tenant's single Reserve of the whole host tier,
// with a deadline far past --reserve-ttl, used to keep every other tenant
// from storing anything until it expired. With a reservation quota it
// gets only that much room, its deadline is capped at MaxReserveTTL, and
// another tenant still stores its pages.
func TestReserveQuota(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 2 << 20, ShmSocket: "off", NoCutoffFloor: true,
		MaxReserveTTL: 2 * time.Second, TenantTokens: map[string]string{"tok-a": "acme", "tok-b": "beta"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	putTenants(ctx, t, n, registry.Tenant{Name: "acme", TokenSHA256: server.HashToken("tok-a2"),
		Quota: registry.Quota{ReserveBytes: 16 * page, Reservations: 16}})
	conn := testnode.Dial(t, n.Addr())
	rpc := pb.NewStrataClient(conn)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	openNS := func(tok, tenant string) ([]byte, error) {
		d := desc
		d.Tenant = tenant
		r, err := rpc.OpenNamespace(as(tok), &pb.OpenNamespaceRequest{Protocol: pb.ProtocolVersion_PROTOCOL_VERSION_1,
			Descriptor_: pbconv.DescriptorProto(d)})
		return r.GetNamespaceId(), err
	}
	var (
		nsA []byte
		err error
	)
	poll.NoError(t, 5*time.Second, 50*time.Millisecond, "acme's etcd token served", func() (err error) {
		nsA, err = openNS("tok-a2", "acme")
		return err
	})
	reserve := func(tok string, ns []byte, from, count int, ttl time.Duration) (reserved int, latest int64) {
		specs := make([]*pb.PageSpec, count)
		for i := range specs {
			k := make([]byte, 32)
			k[0], k[1], k[2] = byte(from+i), byte((from+i)>>8), 0xAB
			specs[i] = &pb.PageSpec{Key: k, Size: page}
		}
		r, err := rpc.Reserve(as(tok), &pb.ReserveRequest{NamespaceId: ns, Pages: specs, DeadlineMs: uint32(ttl.Milliseconds())})
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range r.GetReservations() {
			if res.GetStatus() == pb.ReserveStatus_RESERVE_STATUS_RESERVED {
				reserved++
				latest = max(latest, res.GetDeadlineUnixMs())
			}
		}
		return reserved, latest
	}
	before := time.Now()
	got, latest := reserve("tok-a2", nsA, 0, 128, time.Hour) // the whole tier, for an hour
	if got != 16 {
		t.Fatalf("a tenant with a 16-reservation quota reserved %d of 128 pages", got)
	}
	if limit := before.Add(3 * time.Second).UnixMilli(); latest > limit {
		t.Fatalf("a reservation asked for an hour got a deadline %v from now, past MaxReserveTTL",
			time.UnixMilli(latest).Sub(before).Round(time.Millisecond))
	}
	nsB, err := openNS("tok-b", "beta")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := reserve("tok-b", nsB, 1000, 64, 0); got != 64 { // its reservation share: half the tier
		t.Fatalf("beta found room for %d of 64 pages beside acme's reservations", got)
	}
}

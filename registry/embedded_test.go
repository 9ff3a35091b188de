package registry

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/stacks"
)

func TestEmbeddedRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := NamespaceRecord{ID: hexID('d'), Tenant: "acme", Canonical: []byte(`{"model":"m"}`), CreatedUnixMs: 7}
	tenant := Tenant{Name: "acme", TokenSHA256: tokenHash("t")}

	e := startEtcdIn(t, dir)
	r := openRegistry(t, e.Endpoints())
	ctx := ctxFor(t, 20*time.Second)
	if _, err := r.PutNamespace(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := r.PutTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e = startEtcdIn(t, dir)
	r = openRegistry(t, e.Endpoints())
	got, err := r.Namespace(ctx, rec.ID)
	if err != nil || !bytes.Equal(got.Canonical, rec.Canonical) || got.CreatedUnixMs != 7 {
		t.Fatalf("after restart Namespace = %+v, %v; want %+v", got, err, rec)
	}
	if created, err := r.PutNamespace(ctx, rec); err != nil || created {
		t.Fatalf("after restart PutNamespace = %v, %v; want existing", created, err)
	}
	if ts, err := r.Tenants(ctx); err != nil || len(ts) != 1 || ts[0] != tenant {
		t.Fatalf("after restart Tenants = %+v, %v", ts, err)
	}
}

func TestEmbeddedConfigValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  EmbeddedConfig
	}{
		{"no dir", EmbeddedConfig{}},
		{"any address", EmbeddedConfig{Dir: "d", ClientURL: "http://0.0.0.0:2379"}},
		{"routable address", EmbeddedConfig{Dir: "d", ClientURL: "http://10.1.2.3:2379"}},
		{"host name", EmbeddedConfig{Dir: "d", ClientURL: "http://etcd.example:2379"}},
		{"https", EmbeddedConfig{Dir: "d", ClientURL: "https://127.0.0.1:2379"}},
		{"no port", EmbeddedConfig{Dir: "d", ClientURL: "http://127.0.0.1"}},
		{"routable peer", EmbeddedConfig{Dir: "d", PeerURL: "http://192.168.0.1:2380"}},
	} {
		if _, err := StartEmbedded(context.Background(), tc.cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: StartEmbedded = %v, want ErrInvalid", tc.name, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:0", "http://127.0.0.2:2379", "http://[::1]:0", "http://localhost:0"} {
		if _, err := loopbackURL("client", u); err != nil {
			t.Errorf("loopbackURL(%q) = %v, want ok", u, err)
		}
	}
}

// When etcd is down every call fails with ErrUnavailable within its
// deadline, whether the caller set one or RequestTimeout applies. The slack
// is generous (the tests share two loaded CPUs with a race-enabled etcd);
// a hang would last a minute.
func TestUnavailableWithinDeadline(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	const slack = 2 * time.Second
	// r has no registration (its Close has nothing to revoke) and a long
	// RequestTimeout, so only the callers' deadlines bound its calls.
	r := openRegistry(t, e.Endpoints(), func(c *Config) { c.RequestTimeout = time.Minute })
	// short is registered and relies on a short RequestTimeout.
	const reqTimeout = time.Second
	short := openRegistry(t, e.Endpoints(), func(c *Config) { c.RequestTimeout = reqTimeout })
	if err := short.RegisterNode(ctxFor(t, 5*time.Second), Node{ID: "n"}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	ops := map[string]func(context.Context) error{
		"RegisterNode": func(ctx context.Context) error { return r.RegisterNode(ctx, Node{ID: "m"}) },
		"Nodes":        func(ctx context.Context) error { _, err := r.Nodes(ctx); return err },
		"PutNamespace": func(ctx context.Context) error {
			_, err := r.PutNamespace(ctx, NamespaceRecord{ID: hexID('e'), Tenant: "t", Canonical: []byte("{}")})
			return err
		},
		"Namespace":       func(ctx context.Context) error { _, err := r.Namespace(ctx, hexID('e')); return err },
		"Namespaces":      func(ctx context.Context) error { _, err := r.Namespaces(ctx, ""); return err },
		"DeleteNamespace": func(ctx context.Context) error { return r.DeleteNamespace(ctx, hexID('e')) },
		"PutTenant": func(ctx context.Context) error {
			return r.PutTenant(ctx, Tenant{Name: "t", TokenSHA256: tokenHash("x")})
		},
		"Tenant":          func(ctx context.Context) error { _, err := r.Tenant(ctx, "t"); return err },
		"Tenants":         func(ctx context.Context) error { _, err := r.Tenants(ctx); return err },
		"re-RegisterNode": func(ctx context.Context) error { return short.RegisterNode(ctx, Node{ID: "n", Version: "2"}) },
	}
	const deadline = 300 * time.Millisecond
	for name, op := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := op(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotFound) {
			t.Errorf("%s with etcd down = %v, want ErrUnavailable wrapping DeadlineExceeded", name, err)
		}
		if took > deadline+slack {
			t.Errorf("%s took %v, deadline %v", name, took, deadline)
		}
	}
	// No deadline of the caller's: RequestTimeout bounds the call.
	start := time.Now()
	if _, err := short.Nodes(context.Background()); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Nodes without deadline = %v, want ErrUnavailable wrapping DeadlineExceeded", err)
	}
	if took := time.Since(start); took > reqTimeout+slack {
		t.Errorf("Nodes without deadline took %v, RequestTimeout %v", took, reqTimeout)
	}
	// Close cannot revoke the lease; it says so, in bounded time.
	start = time.Now()
	if err := short.Close(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Close with etcd down = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > reqTimeout+slack {
		t.Errorf("Close took %v, RequestTimeout %v", took, reqTimeout)
	}
	// Calls after Close say closed, not unavailable.
	if _, err := short.Nodes(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Nodes after Close = %v, want ErrClosed", err)
	}

	// Open against a dead endpoint fails within DialTimeout.
	start = time.Now()
	_, err := Open(context.Background(), Config{Endpoints: e.Endpoints(), DialTimeout: reqTimeout})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open with etcd down = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > reqTimeout+slack {
		t.Errorf("Open took %v, DialTimeout %v", took, reqTimeout)
	}
}

// Close does not wait for calls stuck on an unreachable etcd: they fail
// with ErrClosed at once.
func TestCloseInterruptsCalls(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	r := openRegistry(t, e.Endpoints(), func(c *Config) { c.RequestTimeout = time.Minute })
	e.Close()

	errc := make(chan error, 1)
	go func() {
		_, err := r.Nodes(context.Background())
		errc <- err
	}()
	poll.Until(t, 5*time.Second, time.Millisecond, "the call waiting in the etcd client", func() bool {
		return len(errc) > 0 || stacks.Blocked("registry.(*Registry).Nodes", "registry.TestCloseInterruptsCalls")
	})
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatalf("Close without a registration = %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("call interrupted by Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call still stuck 5s after Close")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close and the interrupted call took %v", took)
	}
}

package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testlog"
)

// sharedEtcd serves the tests that do not stop etcd, each under its own
// key prefix: one etcd instead of one per test keeps the package's CPU and
// fsync load (and so its timing) reasonable.
var sharedEtcd *Embedded

// sharedPrefixes holds each test's key prefix in the shared etcd, by
// *testing.T, so that -count runs of one test do not meet.
var (
	sharedPrefixes sync.Map
	sharedSeq      atomic.Int64
)

// TestMain runs the tests on one shared etcd, and fails the run if a
// goroutine they started (the etcd's included) outlives them.
func TestMain(m *testing.M) {
	base := leaktest.Snapshot()
	dir, err := os.MkdirTemp("", "strata-registry-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	sharedEtcd, err = StartEmbedded(ctx, EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0"})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	sharedEtcd.Close()
	os.RemoveAll(dir)
	os.Exit(base.Verify(code))
}

// openShared opens a Registry on the shared etcd, under a prefix of the
// test's own (unique across -count runs).
func openShared(t *testing.T, edit ...func(*Config)) *Registry {
	t.Helper()
	fresh := fmt.Sprintf("/test/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), sharedSeq.Add(1))
	p, _ := sharedPrefixes.LoadOrStore(t, fresh)
	prefix := p.(string)
	return openRegistry(t, sharedEtcd.Endpoints(), append([]func(*Config){func(c *Config) { c.Prefix = prefix }}, edit...)...)
}

// startEtcd starts an embedded etcd on free loopback ports in a fresh
// directory; the test's cleanup stops it.
func startEtcd(t *testing.T) *Embedded {
	t.Helper()
	return startEtcdIn(t, t.TempDir())
}

func startEtcdIn(t *testing.T, dir string) *Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// openRegistry opens a Registry on endpoints with a short lease; the
// test's cleanup closes it.
func openRegistry(t *testing.T, endpoints []string, edit ...func(*Config)) *Registry {
	t.Helper()
	cfg := Config{Endpoints: endpoints, LeaseTTL: 2 * time.Second, Logger: testLogger(t)}
	for _, f := range edit {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// testLogger sends logs to the test log, so that they show only for a
// failing test.
func testLogger(t *testing.T) *slog.Logger {
	return testlog.New(t, slog.LevelDebug)
}

// ctxFor returns a context with the given timeout, cancelled at cleanup.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 50ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, 50*time.Millisecond, what, cond)
}

// proxy forwards TCP connections to etcd and can cut them: the seam for
// partitioning one Registry from etcd while etcd itself stays up.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex // guards down, refused and conns
	down    bool
	refused int // connections refused while down
	conns   map[net.Conn]struct{}
}

// newProxy forwards a loopback port to the etcd client URL endpoint; the
// test's cleanup stops it.
func newProxy(t *testing.T, endpoint string) *proxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: u.Host, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track records a connection pair, or closes it if the proxy went down.
func (p *proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a] = struct{}{}
	p.conns[b] = struct{}{}
	return true
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut drops every connection and refuses new ones until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// refusals is how many connections the proxy has refused while cut.
func (p *proxy) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *proxy) close() {
	p.cut()
	p.ln.Close()
	p.wg.Wait()
}

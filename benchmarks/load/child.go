package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratakv/strata/node"
)

// Servers of their own. By default the strata node and the TCP limit's page
// server run as child processes (this binary, re-executed), as
// redis-server does: every system then pays the same cross-process costs
// (the server's thread woken by the kernel, two schedulers instead of one),
// and every system's CPU figure includes its server's. In one process the
// client's and the server's goroutines hand off inside one Go scheduler,
// which a deployed node never does: on a 2-core VM a node in the load
// generator's process answered one client's 256 KiB gets in 64 µs (p50),
// the same node in its own process in 124 µs, against Redis's 83
// (benchmarks/README.md, "Separate processes, systems in turns").

// childEnv names the role a re-executed binary serves (ServeChild).
const childEnv = "STRATA_LOAD_CHILD"

// Child roles and their parameters (environment variables).
const (
	rolePages     = "pages" // a PageServer over childBytes random bytes of seed childSeed
	roleNode      = "node"  // node.Start with a host tier of childBytes
	childBytesEnv = "STRATA_LOAD_BYTES"
	childSeedEnv  = "STRATA_LOAD_SEED"
	childTLSEnv   = "STRATA_LOAD_TLS" // "cert,key": the node serves TLS
	// childEventsEnv names a tenant whose KV event stream the node
	// publishes (node.Config.Events) on a free port, which the child
	// prints after its address: "addr A events E".
	childEventsEnv = "STRATA_LOAD_EVENTS"
)

// ServeChild, in a process started by startChild, serves its role until
// its standard input closes (the parent closed it or died), then exits; in
// any other process it returns at once. Call it first in main, and in
// TestMain of tests that start children.
func ServeChild() {
	role := os.Getenv(childEnv)
	if role == "" {
		return
	}
	if err := serveChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "strata-load child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveChild(role string) error {
	n, err := strconv.ParseInt(os.Getenv(childBytesEnv), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s=%q: want a positive byte count", childBytesEnv, os.Getenv(childBytesEnv))
	}
	var addr string
	var stop func() error
	switch role {
	case rolePages:
		seed, _ := strconv.ParseUint(os.Getenv(childSeedEnv), 10, 64)
		srv, err := StartPageServer(RandomBytes(int(n), seed))
		if err != nil {
			return err
		}
		addr, stop = srv.Addr(), func() error { srv.Close(); return nil }
	case roleNode:
		dir, err := os.MkdirTemp("", "strata-load-node-")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ncfg := node.Config{Listen: "127.0.0.1:0", DataDir: dir, EmbeddedEtcdURL: "http://127.0.0.1:0", HostBytes: n}
		if files := os.Getenv(childTLSEnv); files != "" {
			ncfg.TLSCert, ncfg.TLSKey, _ = strings.Cut(files, ",")
		}
		tenant := os.Getenv(childEventsEnv)
		if tenant != "" {
			ncfg.Events = eventsConfig(tenant)
		}
		nd, err := node.Start(ctx, ncfg)
		cancel()
		if err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("starting node: %w", err)
		}
		addr, stop = nd.Addr(), func() error { return errors.Join(nd.Close(), os.RemoveAll(dir)) }
		if tenant != "" {
			pub, _ := nd.EventsAddrs(tenant)
			addr += " events " + pub
		}
	case roleProducer, roleConsumer:
		return servePeer(role, int(n))
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	fmt.Printf("addr %s\n", addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return stop()
}

// child is a server process started by startChild or startStratad.
type child struct {
	cmd  *exec.Cmd
	end  io.Closer // ends the process: its standard input, or a SIGTERM to stratad
	addr string
	tick time.Duration
	errs *tailBuffer
	dir  string // the process's data directory, removed once it ended; "" none
	// waited, if set, receives the process's Wait once it exited
	// (stratad's, waited for from its start).
	waited <-chan error
}

// startChild re-executes this binary as role with env and waits (up to a
// minute) for the address it serves.
func startChild(ctx context.Context, role string, env ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	c := &child{cmd: cmd, tick: clockTick(), errs: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = c.errs
	if c.end, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s server: %w", role, err)
	}
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		got <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-got:
		if a, ok := strings.CutPrefix(line, "addr "); ok {
			c.addr = a
			return c, nil
		}
		c.Close()
		return nil, fmt.Errorf("the %s server did not start: %q\n%s", role, line, c.errs.String())
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	c.Close()
	return nil, fmt.Errorf("the %s server did not start within a minute\n%s", role, c.errs.String())
}

// startStratad starts the stratad binary bin as a node of its own, as
// a re-executed child's node is started (embedded etcd, gRPC and the other
// listeners on loopback ports the kernel picks, a host tier of hostBytes,
// a fresh data directory; TLS with tls), with env added to its
// environment, and waits (up to a minute) for the address it logs that it
// serves. It is how an older build's node is measured beside this
// binary's (StrataConfig.NodeBinary); SIGTERM ends it.
func startStratad(ctx context.Context, bin string, hostBytes int64, tls *tlsFiles, env ...string) (*child, error) {
	dir, err := os.MkdirTemp("", "strata-load-node-")
	if err != nil {
		return nil, err
	}
	args := []string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--embedded-etcd-url", "http://127.0.0.1:0",
		"--host-bytes", strconv.FormatInt(hostBytes, 10)}
	if tls != nil {
		args = append(args, "--tls-cert", tls.cert, "--tls-key", tls.key)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	c := &child{cmd: cmd, tick: clockTick(), errs: &tailBuffer{max: 8 << 10}, dir: dir}
	serving := &servingLine{errs: c.errs, addr: make(chan string, 1)}
	cmd.Stderr = serving
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the node %s: %w", bin, err)
	}
	c.end, c.waited = sigterm{cmd.Process}, wait(cmd)
	select {
	case a := <-serving.addr:
		c.addr = a
		return c, nil
	case err := <-c.waited:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the node %s exited before it served: %v\n%s", bin, err, c.errs.String())
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	c.Close()
	return nil, fmt.Errorf("the node %s did not serve within a minute\n%s", bin, c.errs.String())
}

// servingRE finds the gRPC address in stratad's serving log line.
var servingRE = regexp.MustCompile(`strata node serving.* addr=(\S+)`)

// servingLine is a stratad's standard error: kept in errs, and the address
// of its serving line (servingRE) sent on addr, once.
type servingLine struct {
	errs *tailBuffer
	mu   sync.Mutex
	line []byte // guarded by mu
	done bool   // guarded by mu
	addr chan string
}

func (w *servingLine) Write(p []byte) (int, error) {
	w.errs.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		if m := servingRE.FindSubmatch(w.line[:i]); m != nil {
			w.addr <- string(m[1])
			w.done, w.line = true, nil
			return len(p), nil
		}
		w.line = w.line[i+1:]
	}
}

// sigterm ends a process by SIGTERM, as stratad expects.
type sigterm struct{ p *os.Process }

func (s sigterm) Close() error { return s.p.Signal(syscall.SIGTERM) }

// CPUTime is the CPU time the child has used (procCPU).
func (c *child) CPUTime() time.Duration { return procCPU(c.cmd.Process.Pid, c.tick) }

// Close ends the child (its standard input closed, or a SIGTERM) and waits
// for it; one that has not exited after 30 s is killed. Its data
// directory, if any, is removed.
func (c *child) Close() error {
	if c.waited == nil {
		c.waited = wait(c.cmd)
	}
	err := awaitEnd(c.cmd, c.end, c.waited, c.errs, "server process")
	if c.dir != "" {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// endProcess closes stdin, which ends the process cmd runs (a child, a
// Python driver), and waits for it; one that has not exited after 30 s
// is killed. errs is its standard error, quoted when it failed.
func endProcess(cmd *exec.Cmd, stdin io.Closer, errs *tailBuffer, what string) error {
	return awaitEnd(cmd, stdin, wait(cmd), errs, what)
}

// wait waits for the process cmd started, and sends what its Wait
// returned.
func wait(cmd *exec.Cmd) <-chan error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

// awaitEnd is endProcess for a process whose Wait sends on done (wait):
// end closed (its stdin, or a SIGTERM) ends it.
func awaitEnd(cmd *exec.Cmd, end io.Closer, done <-chan error, errs *tailBuffer, what string) error {
	end.Close()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", what, err, errs.String())
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit; killed", what)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.Clone(t.b))
}

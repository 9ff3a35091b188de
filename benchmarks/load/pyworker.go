package load

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Systems driven through Python. Mooncake Store's client is a Python
// extension (mooncake.store.MooncakeDistributedStore), so its workers are
// Python processes: pydriver.py, one process per worker, each answering
// one command a line over its standard input and output (the protocol is
// at the top of pydriver.py). The Go load generator keeps the clock, so a
// Mooncake operation's latency includes a pipe round trip and the
// interpreter. To read Mooncake's figures against a baseline that pays the
// same, PyRedis drives Redis through the same kind of worker (a plain RESP
// client in Python): redis ÷ redis-py is the driver's cost.

//go:embed pydriver.py
var pyDriver []byte

// ErrNoMooncake is returned by StartMooncake when the Python interpreter
// it was given cannot import mooncake.store (the wheel is not installed).
var ErrNoMooncake = errors.New("no Python with the mooncake wheel (set --mooncake-python; benchmarks/README.md says how to install it)")

// MooncakePythonEnv names the interpreter with the mooncake wheel when no
// path is given: strata-load's --mooncake-python defaults to it.
const MooncakePythonEnv = "STRATA_MOONCAKE_PYTHON"

// pySystem is a system whose workers are pydriver.py processes: Mooncake
// (a master and a store server per page size, started by pydriver.py
// serve) or Redis (a redis-server of its own).
type pySystem struct {
	name   string
	python string
	script string // pydriver.py, written to a temporary directory
	dir    string
	redis  *Redis // redis-py only
	tick   time.Duration
	cur    *pyWorkload
}

// StartMooncake checks that python imports mooncake.store and returns the
// Mooncake system: per page size a mooncake_master and a store server
// holding the global segment, both on 127.0.0.1 (TCP transport,
// P2PHANDSHAKE metadata: no metadata server), and one Python worker
// process per worker. ErrNoMooncake when python lacks the wheel.
func StartMooncake(ctx context.Context, python string) (System, error) {
	if python == "" {
		return nil, ErrNoMooncake
	}
	if out, err := exec.CommandContext(ctx, python, "-c", "import mooncake.store").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v %s", ErrNoMooncake, python, err, lastLine(out))
	}
	return newPySystem("mooncake", python, nil)
}

// StartPyRedis starts a redis-server (as StartRedis) driven by Python
// workers: the Mooncake driver's overhead, measured on Redis.
func StartPyRedis(ctx context.Context, python string) (System, error) {
	if python == "" {
		return nil, ErrNoMooncake
	}
	r, err := StartRedisSystem(ctx)
	if err != nil {
		return nil, err
	}
	s, err := newPySystem("redis-py", python, r)
	if err != nil {
		r.Close()
	}
	return s, err
}

func newPySystem(name, python string, redis *Redis) (*pySystem, error) {
	dir, err := os.MkdirTemp("", "strata-load-py-")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "pydriver.py")
	if err := os.WriteFile(script, pyDriver, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &pySystem{name: name, python: python, script: script, dir: dir, redis: redis, tick: clockTick()}, nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Name is "mooncake" or "redis-py".
func (s *pySystem) Name() string { return s.name }

// Close stops the redis-server, if any, and removes the driver's copy.
func (s *pySystem) Close() error {
	var err error
	if s.redis != nil {
		err = s.redis.Close()
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// ServerCPU is the CPU time of every process of the current workload: the
// Python workers (Mooncake's clients: strata's and Redis's clients run in
// this process and are counted there), the store server and the master,
// or redis-server.
func (s *pySystem) ServerCPU() time.Duration {
	var t time.Duration
	if s.redis != nil {
		t += s.redis.ServerCPU()
	}
	if w := s.cur; w != nil {
		for _, pid := range w.pids() {
			t += procCPU(pid, s.tick)
		}
	}
	return t
}

// Prepare starts the deployment of p's page size (Mooncake: master and
// store server), one worker process per worker, and stores the working
// set through worker 0; for Mooncake it then puts and removes as many
// fresh pages as a put case writes, so the segment's memory is touched
// before the clock runs (as strata's arena is).
func (s *pySystem) Prepare(ctx context.Context, p Params) (Workload, error) {
	w := &pyWorkload{p: p, fresh: s.redis == nil, putBase: 1 << 40}
	args := []string{"--page-bytes", strconv.Itoa(p.PageBytes), "--pages", strconv.Itoa(p.Pages), "--prefix", fmt.Sprintf("s%d-", p.PageBytes)}
	if s.redis != nil {
		args = append(args, "--system", "redis", "--redis", s.redis.srv.Addr())
	} else {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		metrics, err := freePort()
		if err != nil {
			return nil, err
		}
		master := fmt.Sprintf("127.0.0.1:%d", port)
		// The working set and a put case's pages, with room under the
		// master's eviction watermark (90%), so nothing is evicted.
		segment := (p.Pages*p.PageBytes + p.PutBytes) * 5 / 4
		w.serve, err = startPyProc(ctx, s.python, s.script, "serve", "--master", master,
			"--metrics-port", strconv.Itoa(metrics), "--segment", strconv.Itoa(segment+64<<20))
		if err != nil {
			return nil, fmt.Errorf("mooncake master and store server: %w", err)
		}
		if pid, err := strconv.Atoi(strings.TrimPrefix(w.serve.ready, "ready ")); err == nil {
			w.masterPid = pid
		}
		args = append(args, "--system", "mooncake", "--master", master)
	}
	s.cur = w
	for range p.Workers {
		pr, err := startPyProc(ctx, s.python, s.script, append([]string{"worker"}, args...)...)
		if err != nil {
			w.Close(ctx)
			return nil, fmt.Errorf("worker: %w", err)
		}
		w.procs = append(w.procs, pr)
	}
	if err := w.procs[0].call("prep"); err != nil {
		w.Close(ctx)
		return nil, fmt.Errorf("storing the working set: %w", err)
	}
	if n := p.PutBytes / p.PageBytes; w.fresh && n > 0 {
		err := w.procs[0].call("put-range %d %d", w.putBase, w.putBase+uint64(n))
		if err == nil {
			err = w.procs[0].call("del %d %d", w.putBase, w.putBase+uint64(n))
		}
		if err != nil {
			w.Close(ctx)
			return nil, fmt.Errorf("warming the segment: %w", err)
		}
		w.putBase += uint64(n)
	}
	return w, nil
}

type pyWorkload struct {
	p         Params
	fresh     bool      // puts write fresh keys (Mooncake), else overwrite the working set (Redis)
	serve     *pyProc   // Mooncake's master and store server, or nil
	masterPid int       // mooncake_master, a child of serve
	procs     []*pyProc // one per worker
	putBase   uint64    // key number of the next put case's first page
}

func (w *pyWorkload) pids() []int {
	var pids []int
	if w.serve != nil {
		pids = append(pids, w.serve.cmd.Process.Pid)
	}
	if w.masterPid != 0 {
		pids = append(pids, w.masterPid)
	}
	for _, p := range w.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (*pyWorkload) Supports(Op) bool { return true }

// FreshPuts is true for Mooncake: every put stores a new key.
func (w *pyWorkload) FreshPuts() bool { return w.fresh }

func (w *pyWorkload) Do(_ context.Context, op Op, wk, i int) error {
	pr := w.procs[wk]
	switch op {
	case Get:
		return pr.call("get %d", i)
	case Put:
		if w.fresh {
			return pr.call("put %d", w.putBase+uint64(i))
		}
		return pr.call("put %d", putSlot(w.p, wk, i))
	case Lookup:
		return pr.call("look %d %d", i, w.p.LookupKeys)
	}
	return fmt.Errorf("%s: no %s", "python driver", op)
}

// After removes the keys a Mooncake put case stored.
func (w *pyWorkload) After(_ context.Context, op Op, n int) error {
	if op != Put || n == 0 || !w.fresh {
		return nil
	}
	from := w.putBase
	w.putBase += uint64(n)
	return w.procs[0].call("del %d %d", from, w.putBase)
}

// Close drops what the workload stored (Redis: the next page size's
// working set must fit under its maxmemory), ends the workers, then the
// store server and master.
func (w *pyWorkload) Close(context.Context) error {
	var err error
	if len(w.procs) > 0 {
		err = w.procs[0].call("flush")
	}
	for _, p := range w.procs {
		err = errors.Join(err, p.close())
	}
	if w.serve != nil {
		err = errors.Join(err, w.serve.close())
	}
	return err
}

// pyProc is one pydriver.py process, or a transfer peer (startLineProc).
type pyProc struct {
	cmd   *exec.Cmd
	in    *bufio.Writer
	inC   io.Closer
	out   *bufio.Reader
	ready string // its first line
	errs  *tailBuffer
}

// startPyProc runs pydriver.py with args (startLineProc).
func startPyProc(ctx context.Context, python, script string, args ...string) (*pyProc, error) {
	p, err := startLineProc(ctx, exec.Command(python, append([]string{"-u", script}, args...)...))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", filepath.Base(script), args[0], err)
	}
	return p, nil
}

// startLineProc starts cmd, a process that answers one command a line
// (pydriver.py, a transfer peer), and waits (up to a minute) for its
// first line, which must start with "ready".
func startLineProc(ctx context.Context, cmd *exec.Cmd) (*pyProc, error) {
	p := &pyProc{cmd: cmd, errs: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = p.errs
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.in, p.inC, p.out = bufio.NewWriter(in), in, bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	got := make(chan error, 1)
	go func() {
		line, err := p.out.ReadString('\n')
		p.ready = strings.TrimSpace(line)
		got <- err
	}()
	select {
	case err = <-got:
		if err == nil && strings.HasPrefix(p.ready, "ready") {
			return p, nil
		}
		err = fmt.Errorf("%q (%v)", p.ready, err)
	case <-time.After(time.Minute):
		err = errors.New("not ready within a minute")
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.close()
	return nil, fmt.Errorf("%w\n%s", err, p.errs.String())
}

// call sends one command and reads its answer, a bare "ok" unless it failed.
func (p *pyProc) call(format string, a ...any) error {
	out, err := p.ask(format, a...)
	if err == nil && out != "" {
		err = fmt.Errorf("worker process: answered %q, want ok", "ok "+out)
	}
	return err
}

// ask sends one command and returns what its answer says after "ok".
func (p *pyProc) ask(format string, a ...any) (string, error) {
	fmt.Fprintf(p.in, format+"\n", a...)
	if err := p.in.Flush(); err != nil {
		return "", fmt.Errorf("worker process: %w\n%s", err, p.errs.String())
	}
	line, err := p.out.ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("worker process: %w\n%s", err, p.errs.String())
	}
	if len(line) == 3 && string(line) == "ok\n" {
		return "", nil
	}
	if out, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "ok "); ok {
		return out, nil
	}
	return "", errors.New(strings.TrimPrefix(strings.TrimSpace(string(line)), "err "))
}

// close ends the process (endProcess).
func (p *pyProc) close() error { return endProcess(p.cmd, p.inC, p.errs, "python process") }

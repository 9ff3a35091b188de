package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

func TestPercentile(t *testing.T) {
	lat := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("p%.0f = %d, want %d", c.p*100, got, c.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestPutSlotsAreDisjointPerWorker(t *testing.T) {
	p := Params{Pages: 10, Workers: 4}
	owner := map[int]int{}
	for w := range p.Workers {
		for i := range 50 {
			s := putSlot(p, w, i)
			if s < 0 || s >= p.Pages {
				t.Fatalf("worker %d op %d: slot %d of %d", w, i, s, p.Pages)
			}
			if o, ok := owner[s]; ok && o != w {
				t.Fatalf("slot %d written by workers %d and %d", s, o, w)
			}
			owner[s] = w
		}
	}
}

// TestRunMemcpy runs every case on the memcpy system: lookups are skipped
// (no equivalent), puts and gets measured, and the report holds them.
func TestRunMemcpy(t *testing.T) {
	res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1, 3}, Duration: 20 * time.Millisecond,
		WorkingSet: 64 << 10}, []System{Memcpy{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want put and get at 2 concurrencies: %+v", len(res), res)
	}
	for _, r := range res {
		if r.Ops == 0 || r.GBps() <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Op == Lookup {
			t.Errorf("implausible result %+v", r)
		}
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, "# t\n", res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| memcpy | 4KiB | 3 |") {
		t.Errorf("table lacks a row:\n%s", md.String())
	}
	if _, err := WritePlots(t.TempDir(), res); err != nil {
		t.Fatal(err)
	}
}

// failing fails its third operation.
type failing struct{ Memcpy }

func (failing) Name() string                                      { return "failing" }
func (failing) Prepare(context.Context, Params) (Workload, error) { return failingWorkload{}, nil }

type failingWorkload struct{}

func (failingWorkload) Supports(Op) bool { return true }
func (failingWorkload) Do(_ context.Context, _ Op, _, i int) error {
	if i == 2 {
		return context.DeadlineExceeded
	}
	return nil
}
func (failingWorkload) After(context.Context, Op, int) error { return nil }
func (failingWorkload) Close(context.Context) error          { return nil }

// TestRunReportsAFailedCaseInItsRow: a case that fails on one system is
// that system's row, error and all; the run goes on to the other systems
// and the later cases (it used to stop at the first failure, issue 19).
func TestRunReportsAFailedCaseInItsRow(t *testing.T) {
	res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1, 2}, Duration: 20 * time.Millisecond,
		Ops: []Op{Put, Get}, Rounds: 2, WorkingSet: 64 << 10}, []System{failing{}, Memcpy{}})
	if err != nil {
		t.Fatalf("a failing case stopped the run: %v", err)
	}
	if len(res) != 8 {
		t.Fatalf("%d results, want 2 systems × 2 ops × 2 concurrencies: %+v", len(res), res)
	}
	for _, r := range res {
		switch {
		case r.System == "failing" && !strings.Contains(r.Err, "operation 2"):
			t.Errorf("%s %s ×%d: error %q, want operation 2's failure", r.System, r.Op, r.Workers, r.Err)
		case r.System == "memcpy" && (r.Err != "" || r.Ops == 0):
			t.Errorf("memcpy %s ×%d: %d ops, error %q", r.Op, r.Workers, r.Ops, r.Err)
		}
	}
	if got := len(Failed(res)); got != 4 {
		t.Errorf("Failed: %d results, want failing's 4", got)
	}
	var md, csv strings.Builder
	if err := WriteMarkdown(&md, "# t\n", res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| failing | 4KiB | 2 | failed (below) |", "failing get 4KiB ×2 failed:", "operation 2 on worker",
		"| memcpy | 4KiB | 2 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md.String())
		}
	}
	if err := WriteCSV(&csv, res); err != nil || !strings.Contains(csv.String(), "operation 2") {
		t.Errorf("results.csv lacks the error (%v):\n%s", err, csv.String())
	}
	if _, err := WritePlots(t.TempDir(), res); err != nil {
		t.Fatal(err)
	}
}

// blocking fails operation 2; every other operation waits for its ctx to
// end and returns its error, as a client call does when cancelled.
type blocking struct{ Memcpy }

func (blocking) Name() string                                      { return "blocking" }
func (blocking) Prepare(context.Context, Params) (Workload, error) { return blockingWorkload{}, nil }

type blockingWorkload struct{ failingWorkload }

func (blockingWorkload) Do(ctx context.Context, _ Op, _, i int) error {
	if i == 2 {
		return errors.New("the real failure")
	}
	<-ctx.Done()
	return fmt.Errorf("put: %w", ctx.Err())
}

// TestRunReportsTheFailureNotItsEcho: the operations that the failing
// one's cancel ended are not reported beside it.
func TestRunReportsTheFailureNotItsEcho(t *testing.T) {
	res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{4}, Duration: 20 * time.Millisecond,
		Ops: []Op{Get}, WorkingSet: 64 << 10}, []System{blocking{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !strings.Contains(res[0].Err, "operation 2 on worker") || strings.Contains(res[0].Err, "canceled") {
		t.Fatalf("results %+v, want operation 2's failure alone", res)
	}
}

// freshKeys is a system whose puts write fresh keys numbered as strata's
// are (the workload's base plus the operation's number, the base moved
// past a run's numbers by After): a key put twice fails as the node
// answers it (already published). It fails one operation, the second of
// the first put run, once.
type freshKeys struct {
	Memcpy
	mu     sync.Mutex
	seen   map[uint64]int // key: how many times put
	failed bool
}

func (s *freshKeys) Name() string { return "fresh" }
func (s *freshKeys) Prepare(context.Context, Params) (Workload, error) {
	return &freshKeysWorkload{s: s, base: 1 << 40}, nil
}

type freshKeysWorkload struct {
	s    *freshKeys
	base uint64
}

func (*freshKeysWorkload) Supports(op Op) bool { return op == Put }
func (*freshKeysWorkload) FreshPuts() bool     { return true }
func (w *freshKeysWorkload) Do(_ context.Context, _ Op, _, i int) error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failed && i == 1 {
		s.failed = true
		return errors.New("injected failure")
	}
	k := w.base + uint64(i)
	s.seen[k]++
	if s.seen[k] > 1 {
		return fmt.Errorf("key %d already published", k)
	}
	return nil
}
func (w *freshKeysWorkload) After(_ context.Context, _ Op, n int) error {
	w.base += uint64(n)
	return nil
}
func (*freshKeysWorkload) Close(context.Context) error { return nil }

// TestFreshPutsNeverRepeatAKey: over settling, warm-ups, rounds, workers
// and a failed warm-up, no put writes a key another put wrote (issue 19:
// numbers a failed warm-up or settle had taken were handed out again).
func TestFreshPutsNeverRepeatAKey(t *testing.T) {
	for _, settle := range []time.Duration{0, 15 * time.Millisecond} {
		sys := &freshKeys{seen: map[uint64]int{}}
		res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1, 4, 3}, Ops: []Op{Put},
			Duration: 30 * time.Millisecond, Warmup: 30 * time.Millisecond, Settle: settle, Rounds: 3,
			PutBudget: 3 * 64 * 4096, WorkingSet: 64 << 10}, []System{sys})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if (i == 0) != (r.Err != "") || (i == 0 && !strings.Contains(r.Err, "injected")) {
				t.Errorf("settle %v: put ×%d: error %q; want the injected failure in the first case only", settle, r.Workers, r.Err)
			}
			if i > 0 && r.Ops == 0 {
				t.Errorf("settle %v: put ×%d measured nothing", settle, r.Workers)
			}
		}
		for k, n := range sys.seen {
			if n > 1 {
				t.Errorf("settle %v: key %d put %d times", settle, k, n)
			}
		}
	}
}

// turns is a memcpy system that logs which system starts a slice.
type turns struct {
	Memcpy
	name string
	log  *[]string
}

func (s turns) Name() string { return s.name }
func (s turns) Prepare(ctx context.Context, p Params) (Workload, error) {
	wl, err := s.Memcpy.Prepare(ctx, p)
	return turnsWorkload{Workload: wl, s: s}, err
}

type turnsWorkload struct {
	Workload
	s turns
}

func (w turnsWorkload) Do(ctx context.Context, op Op, wk, i int) error {
	if i == 0 && wk == 0 {
		*w.s.log = append(*w.s.log, w.s.name)
	}
	return w.Workload.Do(ctx, op, wk, i)
}

// TestRunRounds: with Rounds, the systems take turns slice by slice within
// each case, and the results still come system by system.
func TestRunRounds(t *testing.T) {
	var log []string
	systems := []System{turns{name: "a", log: &log}, turns{name: "b", log: &log}}
	res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1}, Ops: []Op{Get},
		Duration: 30 * time.Millisecond, Rounds: 3, WorkingSet: 64 << 10}, systems)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, ""), "ababab"; got != want {
		t.Fatalf("slices ran in the order %q, want %q", got, want)
	}
	if len(res) != 2 || res[0].System != "a" || res[1].System != "b" {
		t.Fatalf("results %+v, want a's then b's", res)
	}
	for _, r := range res {
		if r.Ops == 0 || r.Elapsed < 25*time.Millisecond {
			t.Errorf("%s: %d ops in %v, want the three slices' sum (30ms)", r.System, r.Ops, r.Elapsed)
		}
	}
}

// TestRunSettle: Settle runs each system once per page size, before its
// first case and off the clock; later cases do not settle again. The
// settle (1 s) is far longer than a case's three 10 ms slices take even on
// a loaded machine, so a settle counted in a case shows whatever the load.
func TestRunSettle(t *testing.T) {
	for _, settle := range []time.Duration{0, time.Second} {
		var log []string
		systems := []System{turns{name: "a", log: &log}, turns{name: "b", log: &log}}
		res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1}, Ops: []Op{Get, Put},
			Duration: 30 * time.Millisecond, Rounds: 3, Settle: settle, WorkingSet: 64 << 10}, systems)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("ab", 6) // two cases (get, put) of three slices each
		if settle > 0 {
			want = "ab" + want
		}
		if got := strings.Join(log, ""); got != want {
			t.Fatalf("settle %v: runs started in the order %q, want %q", settle, got, want)
		}
		for _, r := range res {
			if r.Elapsed >= settle && settle > 0 {
				t.Errorf("settle %v: %s %s measured %v: the settling was counted", settle, r.System, r.Op, r.Elapsed)
			}
		}
	}
}

// TestMain lets the test binary serve as the page server process that
// LoopbackTCP starts (it re-executes itself), and checks that the tests
// leave no goroutine running.
func TestMain(m *testing.M) {
	ServeChild()
	leaktest.Main(m)
}

// TestLoopbackTCPProcess runs gets and puts against a page server of its
// own process, counts that process's CPU, and ends it on Close.
func TestLoopbackTCPProcess(t *testing.T) {
	sys := &LoopbackTCP{}
	p := Params{PageBytes: 64 << 10, Pages: 16, Workers: 1}
	wl, err := sys.Prepare(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := sys.ServerCPU()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; sys.ServerCPU() == cpu0; i++ { // CPU time moves in clock ticks
		if time.Now().After(deadline) {
			t.Fatalf("the page server's CPU time stayed at %v over %d operations", cpu0, i)
		}
		op := Get
		if i%2 == 1 {
			op = Put
		}
		if err := wl.Do(t.Context(), op, 0, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := wl.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := sys.cur.cmd.ProcessState; st == nil || !st.Exited() {
		t.Fatal("the page server process did not exit when its workload closed")
	}
}

// trimKeys is a system whose puts write fresh keys that it can trim while
// a put case runs (Trimmer). It checks what a trim asks for: every key
// trimmed was put, its put has returned, and no key is dropped twice.
type trimKeys struct {
	Memcpy
	mu      sync.Mutex
	state   map[uint64]int // key: putting, put or dropped
	live    int            // keys put and not dropped
	maxLive int
	trims   int
	bad     []string
}

const (
	putting = iota + 1
	put
	dropped
)

func (s *trimKeys) Name() string { return "trim" }
func (s *trimKeys) Prepare(context.Context, Params) (Workload, error) {
	return &trimKeysWorkload{s: s, base: 1 << 40}, nil
}

type trimKeysWorkload struct {
	s    *trimKeys
	base uint64
	done int // puts of this run below it are trimmed
}

func (*trimKeysWorkload) Supports(op Op) bool { return op == Put }
func (*trimKeysWorkload) FreshPuts() bool     { return true }
func (w *trimKeysWorkload) Do(_ context.Context, _ Op, _, i int) error {
	s, k := w.s, w.base+uint64(i)
	s.mu.Lock()
	if s.state[k] != 0 {
		s.bad = append(s.bad, fmt.Sprintf("key %d put again", k))
	}
	s.state[k] = putting
	s.mu.Unlock()
	for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; { // in flight while others return
		runtime.Gosched()
	}
	s.mu.Lock()
	s.state[k] = put
	s.live++
	s.maxLive = max(s.maxLive, s.live)
	s.mu.Unlock()
	return nil
}

// drop drops keys [from, to) of this run; why names the caller.
func (w *trimKeysWorkload) drop(from, to int, why string) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := from; i < to; i++ {
		k := w.base + uint64(i)
		if st := s.state[k]; st != put {
			s.bad = append(s.bad, fmt.Sprintf("%s dropped key %d in state %d", why, k, st))
			continue
		}
		s.state[k] = dropped
		s.live--
	}
}

func (w *trimKeysWorkload) Trim(_ context.Context, from, to int) error {
	if from != w.done {
		w.s.mu.Lock()
		w.s.bad = append(w.s.bad, fmt.Sprintf("trim from %d, want %d", from, w.done))
		w.s.mu.Unlock()
	}
	w.drop(from, to, "Trim")
	w.done = to
	w.s.trims++ // Trim runs one at a time; read after Run
	return nil
}

func (w *trimKeysWorkload) After(_ context.Context, _ Op, n int) error {
	w.drop(w.done, n, "After")
	w.base += uint64(n)
	w.done = 0
	return nil
}
func (*trimKeysWorkload) Close(context.Context) error { return nil }

// TestFreshPutsTrimmed: a workload that trims (Trimmer) runs its put
// cases for their duration, past the budget, holding about a budget of
// pages; a trim covers only puts that have returned, each once, and After
// drops the rest.
func TestFreshPutsTrimmed(t *testing.T) {
	const window = 64 // pages of PutBudget
	sys := &trimKeys{state: map[uint64]int{}}
	res, err := Run(t.Context(), Config{PageSizes: []int{4096}, Concurrency: []int{1, 4}, Ops: []Op{Put},
		Duration: 60 * time.Millisecond, Warmup: 20 * time.Millisecond, Settle: 10 * time.Millisecond, Rounds: 2,
		PutBudget: window * 4096, WorkingSet: 64 << 10}, []System{sys})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != "" || r.Ops <= 2*window {
			t.Errorf("put ×%d: %d puts, error %q; want more than the budget's %d (twice over), no error", r.Workers, r.Ops, r.Err, window)
		}
	}
	for _, b := range sys.bad {
		t.Error(b)
	}
	for k, st := range sys.state {
		if st != dropped {
			t.Errorf("key %d left in state %d", k, st)
		}
	}
	// A trim waits for the oldest put in flight, so how many are held at
	// once depends on the scheduler (68 to 579 in runs on 2 cores); without
	// trims it would be every key.
	t.Logf("%d keys, %d trims, at most %d held", len(sys.state), sys.trims, sys.maxLive)
	if sys.trims == 0 || sys.maxLive > len(sys.state)/4 {
		t.Errorf("%d trims, at most %d of %d keys held at once; want trims keeping it near %d", sys.trims, sys.maxLive, len(sys.state), window)
	}
}

// TestStrataNodeProcs: a node started as a process with NodeProcs runs
// with that GOMAXPROCS in its environment, whatever this process has.
func TestStrataNodeProcs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Setenv("GOMAXPROCS", "3")
	sys, err := StartStrata(t.Context(), StrataConfig{NodeProcs: 1, HostBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sys.child.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range strings.Split(string(env), "\x00") {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			got = append(got, kv)
		}
	}
	if len(got) != 1 || got[0] != "GOMAXPROCS=1" {
		t.Errorf("the node's environment has %q, want only GOMAXPROCS=1", got)
	}
	if _, err := StartStrata(t.Context(), StrataConfig{NodeProcs: 1, InProcess: true}); err == nil {
		t.Error("NodeProcs with InProcess: no error")
	}
}

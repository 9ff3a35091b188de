// Package load is the engine of the strata-load command: it runs closed-loop
// put, get and lookup workloads of fixed-size pages against several systems
// (a strata node, Redis, raw loopback TCP, memcpy, Mooncake Store) over the same page sizes,
// concurrencies and working set, and reports throughput, latency
// percentiles and CPU per operation as a markdown table, a CSV file and PNG
// plots.
//
// A System is anything that can store and return pages; adding a transport
// (shared memory, RDMA) is adding a System, or a strata System whose client
// picks that transport.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one kind of operation.
type Op string

// The operations a workload runs. One put or get moves one page; one lookup
// asks about Config.LookupKeys keys.
const (
	Put    Op = "put"
	Get    Op = "get"
	Lookup Op = "lookup"
)

// ParseOp names an operation.
func ParseOp(s string) (Op, error) {
	switch o := Op(s); o {
	case Put, Get, Lookup:
		return o, nil
	}
	return "", fmt.Errorf("unknown operation %q (put, get, lookup)", s)
}

// A System stores and returns pages.
type System interface {
	// Name labels the system's rows, e.g. "strata", "redis".
	Name() string
	// Prepare readies a workload of size-byte pages for up to workers
	// concurrent workers: the get working set is stored before it returns.
	Prepare(ctx context.Context, p Params) (Workload, error)
	// Close releases what the system started.
	Close() error
}

// Params describe the pages of one Prepare.
type Params struct {
	// PageBytes is the size of every page.
	PageBytes int
	// Pages is how many pages the get working set holds.
	Pages int
	// Workers is the most concurrent workers that will call Do.
	Workers int
	// LookupKeys is how many keys one lookup asks about.
	LookupKeys int
	// PutBytes is the most bytes of fresh pages one put case holds,
	// warm-up included: all it writes where puts stop at the budget, about
	// what a Trimmer's case holds at once (0 when no put runs).
	PutBytes int
	// Batch is how many pages one put or get moves (1: one page).
	Batch int
}

// A Workload runs the operations of one page size.
type Workload interface {
	// Supports reports whether the system has an equivalent of op.
	Supports(op Op) bool
	// Do performs operation number i of op as worker w (0 <= w < Workers).
	// Puts with distinct i write distinct pages where the system needs
	// fresh keys; gets and lookups read round-robin over the working set.
	Do(ctx context.Context, op Op, w, i int) error
	// After runs off the clock once a case of op has run operations 0..n-1
	// (a strata put case deletes the pages it wrote).
	After(ctx context.Context, op Op, n int) error
	// Close drops the working set.
	Close(ctx context.Context) error
}

// FreshPuts is implemented by workloads whose puts write fresh pages (and
// so fill the system) rather than overwrite the working set: their put
// cases stop at Config.PutBudget bytes, an eighth of that more for the
// warm-up, unless the workload is also a Trimmer.
type FreshPuts interface {
	FreshPuts() bool
}

// Trimmer is implemented by FreshPuts workloads that can drop what their
// earliest puts wrote while a put case runs. Such a case runs for its
// whole Duration instead of stopping at Config.PutBudget: once the puts
// that have returned hold a budget of pages, the oldest half of them are
// trimmed, beside the workers and on the clock (as a Redis SET that
// overwrites a key frees the old value within the measured time).
type Trimmer interface {
	// Trim drops what the puts numbered [from, to) wrote (Do's numbers,
	// before After moves past them). Every one of them has returned, and
	// Trim is not called concurrently with itself or After.
	Trim(ctx context.Context, from, to int) error
}

// ServerCPU is implemented by systems whose server is another process:
// the CPU time it has used so far, added to each case's CPU figure.
type ServerCPU interface {
	ServerCPU() time.Duration
}

// Config is what one run measures. Zero fields take their defaults.
type Config struct {
	// Ops to run, in this order per page size. Default put, get, lookup.
	Ops []Op
	// PageSizes in bytes. Default 64 KiB, 256 KiB, 1 MiB, 4 MiB.
	PageSizes []int
	// Concurrency levels (workers, each with its own connection). Default
	// 1, 4, 8, 32.
	Concurrency []int
	// Duration of one case, measured after its warm-up. Default 1s.
	Duration time.Duration
	// Warmup runs before each case, unmeasured. Default Duration/5.
	Warmup time.Duration
	// Settle runs once per system and page size, unmeasured, before the
	// system's first case of that size (its op and concurrency): a server
	// process that was just started, as each system's is per page size,
	// serves its first seconds with a long latency tail (benchmarks/
	// README.md). Default 0: none.
	Settle time.Duration
	// Rounds splits each case into this many slices of Duration/Rounds
	// (each after Warmup/Rounds of warm-up), and the systems take turns
	// slice by slice: for one op, page size and concurrency, every system
	// runs its first slice, then every system its second, and so on. A
	// machine whose speed drifts (a shared VM, a neighbour's build) then
	// slows every system alike, and their ratios hold. Default 1.
	Rounds int
	// WorkingSet is the bytes of pages gets read round-robin (at least
	// one page, and enough pages for every worker). Default 256 MiB.
	WorkingSet int
	// PutBudget bounds the fresh pages one put case leaves on a system
	// whose puts write fresh pages (FreshPuts), so that a node never
	// evicts during a put: a Trimmer's case holds at most about this many
	// bytes at once (plus a page per worker) and runs for its Duration;
	// another's stops after writing this many (its warm-up writes up to an
	// eighth more). Default 512 MiB.
	PutBudget int
	// LookupKeys is how many keys one lookup asks about. Default 1000.
	LookupKeys int
	// Batch is how many pages one put or get moves, as one call of the
	// system (strata: one Put or Get of Batch pages; Redis: Batch SETs or
	// GETs pipelined, one write, then the replies); systems without a
	// batch (Batcher) skip put and get. Default 1.
	Batch int
	// Progress, if set, receives the progress bar. Default none.
	Progress io.Writer
}

func (c *Config) defaults() {
	if len(c.Ops) == 0 {
		c.Ops = []Op{Put, Get, Lookup}
	}
	if len(c.PageSizes) == 0 {
		c.PageSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20}
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 4, 8, 32}
	}
	if c.Duration <= 0 {
		c.Duration = time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = c.Duration / 5
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.WorkingSet <= 0 {
		c.WorkingSet = 256 << 20
	}
	if c.PutBudget <= 0 {
		c.PutBudget = 512 << 20
	}
	if c.LookupKeys <= 0 {
		c.LookupKeys = 1000
	}
	if c.Batch <= 0 {
		c.Batch = 1
	}
}

// Batcher is implemented by workloads whose puts and gets move
// Params.Batch pages each.
type Batcher interface {
	Batches() bool
}

// supports reports whether wl runs op with p's batch.
func supports(wl Workload, op Op, p Params) bool {
	if !wl.Supports(op) {
		return false
	}
	if b, ok := wl.(Batcher); p.Batch > 1 && op != Lookup && (!ok || !b.Batches()) {
		return false
	}
	return true
}

// Result is one measured case.
type Result struct {
	System    string
	Op        Op
	PageBytes int
	Workers   int
	// Ops is how many operations completed in Elapsed.
	Ops     int
	Elapsed time.Duration
	// Bytes moved per operation (a page for put and get, 0 for lookup).
	BytesPerOp int
	// KeysPerOp is how many keys one operation covers.
	KeysPerOp int
	// P50, P99 are per-operation latencies (nearest rank).
	P50, P99 time.Duration
	// CPU is the CPU time per operation: this process, plus the server
	// process for systems that implement ServerCPU.
	CPU time.Duration
	// Err, when not empty, says why the case failed (an operation
	// returned an error): the figures are then those of the slices that
	// completed before it, and reports show the error instead.
	Err string
}

// Failed returns the results whose case failed.
func Failed(results []Result) []Result {
	var out []Result
	for _, r := range results {
		if r.Err != "" {
			out = append(out, r)
		}
	}
	return out
}

// GBps is the aggregate throughput in 10^9 bytes per second.
func (r Result) GBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) * float64(r.BytesPerOp) / r.Elapsed.Seconds() / 1e9
}

// OpsPerSec is the aggregate operation rate.
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Run measures every case of cfg on every system: per page size it
// prepares every system's working set, then runs each op at each
// concurrency on every system, the systems taking turns (Config.Rounds).
// Results come system by system, then by page size, op and concurrency.
// A case whose operation fails on a system is that system's result with
// Err set (its later slices are skipped) and the run goes on; Run's error
// is for what stops the whole run: a system that cannot prepare a page
// size, a working set that cannot be dropped, ctx ending.
func Run(ctx context.Context, cfg Config, systems []System) ([]Result, error) {
	cfg.defaults()
	bar := newBar(cfg, systems)
	defer bar.finish()
	maxWorkers := 0
	for _, w := range cfg.Concurrency {
		maxWorkers = max(maxWorkers, w)
	}
	bySys := make([][]Result, len(systems))
	collect := func() []Result {
		var out []Result
		for _, r := range bySys {
			out = append(out, r...)
		}
		return out
	}
	for _, size := range cfg.PageSizes {
		p := Params{PageBytes: size, Pages: max(maxWorkers, cfg.WorkingSet/size, 1),
			Workers: maxWorkers, LookupKeys: cfg.LookupKeys, Batch: cfg.Batch}
		if slices.Contains(cfg.Ops, Put) {
			p.PutBytes = cfg.PutBudget + cfg.PutBudget/8
		}
		wls := make([]Workload, len(systems))
		closeAll := func() error {
			var err error
			for i, wl := range wls {
				if wl != nil {
					if cerr := wl.Close(ctx); cerr != nil {
						err = errors.Join(err, fmt.Errorf("%s, %s pages: %w", systems[i].Name(), SizeLabel(size), cerr))
					}
				}
			}
			return err
		}
		for i, sys := range systems {
			bar.describe(fmt.Sprintf("%s %s: storing the working set", sys.Name(), SizeLabel(size)))
			wl, err := sys.Prepare(ctx, p)
			if err != nil {
				err = fmt.Errorf("%s, %s pages: preparing: %w", sys.Name(), SizeLabel(size), err)
				return collect(), errors.Join(err, closeAll())
			}
			wls[i] = wl
		}
		err := runSize(ctx, cfg, systems, wls, p, bar, bySys)
		if err = errors.Join(err, closeAll()); err != nil {
			return collect(), err
		}
	}
	return collect(), nil
}

// runSize runs every op and concurrency of one page size, appending each
// system's results to out[system].
func runSize(ctx context.Context, cfg Config, systems []System, wls []Workload, p Params, bar *bar, out [][]Result) error {
	settled := make([]bool, len(systems))
	for _, op := range cfg.Ops {
		for _, w := range cfg.Concurrency {
			var run []int // the systems that have op
			for i, wl := range wls {
				if supports(wl, op, p) {
					run = append(run, i)
				} else {
					bar.skip()
				}
			}
			// A case that fails on one system is that system's row
			// (Result.Err); the others, and the later cases, still run.
			acc := make([]slice, len(systems))
			for _, i := range run {
				if cfg.Settle <= 0 || settled[i] {
					continue
				}
				settled[i] = true
				bar.describe(fmt.Sprintf("%s %s %s ×%d (settling)", systems[i].Name(), op, SizeLabel(p.PageBytes), w))
				if err := settle(ctx, cfg, wls[i], op, p, w); err != nil {
					acc[i].err = fmt.Errorf("settling: %w", err)
				}
			}
			for round := range cfg.Rounds {
				for _, i := range run {
					if acc[i].err != nil {
						continue
					}
					bar.describe(fmt.Sprintf("%s %s %s ×%d (round %d/%d)", systems[i].Name(), op, SizeLabel(p.PageBytes), w, round+1, cfg.Rounds))
					sl, err := runSlice(ctx, cfg, systems[i], wls[i], op, p, w)
					if err != nil {
						acc[i].err = fmt.Errorf("round %d/%d: %w", round+1, cfg.Rounds, err)
						continue
					}
					acc[i].add(sl)
				}
			}
			if err := ctx.Err(); err != nil { // interrupted: no case failed, the run stopped
				return err
			}
			for _, i := range run {
				out[i] = append(out[i], acc[i].result(systems[i].Name(), op, p, w))
				bar.done()
			}
		}
	}
	return nil
}

// slice is what one or more runs of a case measured.
type slice struct {
	lat     []time.Duration
	elapsed time.Duration
	cpu     time.Duration
	err     error // the case failed
}

func (s *slice) add(o slice) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
	s.cpu += o.cpu
}

func (s *slice) result(system string, op Op, p Params, workers int) Result {
	r := Result{System: system, Op: op, PageBytes: p.PageBytes, Workers: workers,
		Ops: len(s.lat), Elapsed: s.elapsed, KeysPerOp: 1}
	if s.err != nil {
		r.Err = s.err.Error()
	}
	switch op {
	case Put, Get:
		r.BytesPerOp = p.PageBytes * max(1, p.Batch)
	case Lookup:
		r.KeysPerOp = p.LookupKeys
	}
	if len(s.lat) > 0 {
		r.P50, r.P99 = percentile(s.lat, 0.50), percentile(s.lat, 0.99)
		r.CPU = s.cpu / time.Duration(len(s.lat))
	}
	return r
}

// freshPuts reports whether op writes fresh pages on wl (FreshPuts).
func freshPuts(wl Workload, op Op) bool {
	f, ok := wl.(FreshPuts)
	return ok && op == Put && f.FreshPuts()
}

// sliceBudget is how many pages one slice of op may put when its puts
// write fresh pages (FreshPuts) that the workload cannot trim, else 0 (no
// bound).
func sliceBudget(cfg Config, wl Workload, op Op, p Params) int64 {
	if _, ok := wl.(Trimmer); freshPuts(wl, op) && !ok {
		return int64(max(1, cfg.PutBudget/p.PageBytes/cfg.Rounds/max(1, p.Batch)))
	}
	return 0
}

// newTrim is the trimming of op's fresh puts on wl (Trimmer), or nil.
func newTrim(cfg Config, wl Workload, op Op, p Params) *trim {
	if t, ok := wl.(Trimmer); ok && freshPuts(wl, op) {
		return &trim{t: t, window: int64(max(2, cfg.PutBudget/p.PageBytes/max(1, p.Batch)))}
	}
	return nil
}

// trim is the trimming of one run's fresh puts, across the closed loops
// (warm-up, then measurement) that share its numbers.
type trim struct {
	t      Trimmer
	window int64        // returned, untrimmed puts that start a trim
	done   atomic.Int64 // puts numbered below it are trimmed
}

// settle runs op closed-loop for Config.Settle, unmeasured; fresh puts a
// workload cannot trim stop early, at an eighth of a slice's budget, as a
// warm-up does, and what they wrote is then undone like a slice's
// (Workload.After).
func settle(ctx context.Context, cfg Config, wl Workload, op Op, p Params, workers int) error {
	var next atomic.Int64
	l := closedLoop{wl: wl, op: op, workers: workers, next: &next, limit: -1, trim: newTrim(cfg, wl, op, p)}
	if budget := sliceBudget(cfg, wl, op, p); budget > 0 {
		l.limit = max(1, budget/8)
	}
	_, err := l.run(ctx, cfg.Settle)
	// After even when an operation failed: the next run must not reuse
	// the numbers this one took (a fresh put's key is its number).
	return errors.Join(err, wl.After(ctx, op, int(next.Load())))
}

// runSlice runs op closed-loop on workers goroutines: a warm-up of
// Warmup/Rounds, then Duration/Rounds measured; fresh puts a workload
// cannot trim stop early at PutBudget/Rounds bytes (the warm-up at an
// eighth of that).
func runSlice(ctx context.Context, cfg Config, sys System, wl Workload, op Op, p Params, workers int) (slice, error) {
	d, warmup := cfg.Duration/time.Duration(cfg.Rounds), cfg.Warmup/time.Duration(cfg.Rounds)
	var next atomic.Int64
	warm := closedLoop{wl: wl, op: op, workers: workers, next: &next, limit: -1, trim: newTrim(cfg, wl, op, p)}
	meas := warm
	budget := sliceBudget(cfg, wl, op, p)
	if budget > 0 {
		warm.limit = max(1, budget/8)
	}
	if _, err := warm.run(ctx, warmup); err != nil {
		// The numbers the warm-up took are spent (After), as a slice's are.
		return slice{}, errors.Join(fmt.Errorf("warm-up: %w", err), wl.After(ctx, op, int(next.Load())))
	}
	if budget > 0 {
		meas.limit = next.Load() + budget
	}
	srvCPU := func() time.Duration { return 0 }
	if s, ok := sys.(ServerCPU); ok {
		srvCPU = s.ServerCPU
	}
	c0, s0 := CPUTime(), srvCPU()
	t0 := time.Now()
	lat, err := meas.run(ctx, d)
	elapsed := time.Since(t0)
	cpu := CPUTime() - c0 + srvCPU() - s0
	err = errors.Join(err, wl.After(ctx, op, int(next.Load())))
	if err != nil {
		return slice{}, err
	}
	return slice{lat: lat, elapsed: elapsed, cpu: cpu}, nil
}

// closedLoop runs operations numbered from next on workers goroutines,
// each starting its next as soon as its last returns, until d has passed or
// the numbers reach limit (negative: none). With trim, a goroutine beside
// them trims the oldest returned puts whenever trim.window of them are
// untrimmed.
type closedLoop struct {
	wl      Workload
	op      Op
	workers int
	next    *atomic.Int64
	limit   int64
	trim    *trim
}

// idle marks a worker of closedLoop.run without an operation in flight.
const idle = math.MaxInt64

func (l closedLoop) run(ctx context.Context, d time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	lats := make([][]time.Duration, l.workers)
	errs := make([]error, l.workers)
	var cancelled atomic.Pointer[error] // the first error of an operation ended by the cancel
	// busy[w] is at most the number of worker w's operation in flight
	// (idle: none), so that no number at or above the least of them and
	// next has been handed out and not returned.
	busy := make([]atomic.Int64, l.workers)
	for w := range busy {
		busy[w].Store(idle)
	}
	kick, stopTrim := make(chan struct{}, 1), make(chan struct{})
	var trimErr error
	trimmed := make(chan struct{})
	if l.trim != nil {
		go func() {
			defer close(trimmed)
			for {
				select {
				case <-stopTrim:
					return
				case <-kick:
				}
				select {
				case <-stopTrim: // the workers are done: what is left is After's
					return
				default:
				}
				// next before busy: a number taken after next was read is
				// at least next, and one taken before is in busy.
				low := l.next.Load()
				for w := range busy {
					low = min(low, busy[w].Load())
				}
				from, to := l.trim.done.Load(), min(low, l.next.Load()-l.trim.window/2)
				if to <= from {
					continue
				}
				if err := l.trim.t.Trim(ctx, int(from), int(to)); err != nil {
					if ctx.Err() == nil { // else an echo of what ended the run
						trimErr = fmt.Errorf("trimming puts %d..%d: %w", from, to, err)
						cancel()
					}
					return
				}
				l.trim.done.Store(to)
			}
		}()
	} else {
		close(trimmed)
	}
	var wg sync.WaitGroup
	for w := range l.workers {
		wg.Go(func() {
			defer busy[w].Store(idle)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				busy[w].Store(l.next.Load()) // before the number is taken
				i := l.next.Add(1) - 1
				if l.limit >= 0 && i >= l.limit {
					return
				}
				busy[w].Store(i)
				t0 := time.Now()
				err := l.wl.Do(ctx, l.op, w, int(i))
				lat := time.Since(t0)
				busy[w].Store(idle)
				if err == nil && l.trim != nil && i-l.trim.window >= l.trim.done.Load() {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
				if err != nil {
					// An operation ended by another's failure (the cancel
					// below) is not a failure of its own.
					if ctx.Err() == nil {
						errs[w] = fmt.Errorf("operation %d on worker %d: %w", i, w, err)
					} else {
						err = fmt.Errorf("operation %d on worker %d: %w", i, w, err)
						cancelled.CompareAndSwap(nil, &err)
					}
					cancel()
					return
				}
				lats[w] = append(lats[w], lat)
			}
		})
	}
	wg.Wait()
	close(stopTrim)
	<-trimmed
	if l.limit >= 0 && l.next.Load() > l.limit {
		l.next.Store(l.limit)
	}
	var all []time.Duration
	for _, s := range lats {
		all = append(all, s...)
	}
	err := errors.Join(append(errs, trimErr)...)
	if c := cancelled.Load(); err == nil && c != nil { // the caller's ctx ended the run
		err = *c
	}
	return all, err
}

// SizeLabel names a byte count: 64KiB, 4MiB.
func SizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// RandomBytes returns n reproducible pseudo-random bytes.
func RandomBytes(n int, seed uint64) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

// closeAll closes every one of cs and joins their errors.
func closeAll[C io.Closer](cs []C) error {
	var err error
	for _, c := range cs {
		err = errors.Join(err, c.Close())
	}
	return err
}

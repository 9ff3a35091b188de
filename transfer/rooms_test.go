package transfer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratakv/strata/namespace"
)

// pinner is the Pinner seam's fake: it counts live pins, refuses a publish
// naming a key in missing (a page not committed), and can hold a Pin call
// until told to go on.
type pinner struct {
	mu      sync.Mutex
	live    map[*pin]bool
	missing map[namespace.Key]bool
	entered chan struct{} // when set, Pin says it is in, then waits on proceed
	proceed chan struct{}
}

type pin struct {
	p        *pinner
	released int
}

func (p *pin) Release() {
	p.p.mu.Lock()
	defer p.p.mu.Unlock()
	p.released++
	delete(p.p.live, p)
}

func newPinner() *pinner { return &pinner{live: map[*pin]bool{}, missing: map[namespace.Key]bool{}} }

func (p *pinner) Pin(ctx context.Context, tenant string, pg Pages, ttl time.Duration) (Pin, error) {
	if p.entered != nil {
		p.entered <- struct{}{}
		<-p.proceed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range pg.Keys {
		if p.missing[k] {
			return nil, fmt.Errorf("page %x is not committed", k[:4])
		}
	}
	pn := &pin{p: p}
	p.live[pn] = true
	return pn, nil
}

func (p *pinner) pins() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var desc = namespace.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r1", Engine: "vllm", DType: "bf16",
	PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 8, TPSize: 1}

func pages(n int) Pages {
	p := Pages{Namespace: desc, Tokens: 16 * n, Bytes: uint64(n) * 1024}
	for i := range n {
		p.Keys = append(p.Keys, namespace.Key{byte(i + 1)})
	}
	return p
}

type fixture struct {
	*Rooms
	pn  *pinner
	clk *clock
}

func newFixture(t *testing.T, cfg Config) fixture {
	t.Helper()
	f := fixture{pn: newPinner(), clk: &clock{t: time.Unix(1_800_000_000, 0)}}
	cfg.Pinner, cfg.Now = f.pn, f.clk.now
	f.Rooms = New(cfg)
	t.Cleanup(f.Close)
	return f
}

func (f fixture) openPublish(t *testing.T, room string, n int) Attempt {
	t.Helper()
	a, err := f.Open("acme", room)
	if err != nil {
		t.Fatalf("open %s: %v", room, err)
	}
	if _, err := f.Publish(context.Background(), "acme", room, a, pages(n)); err != nil {
		t.Fatalf("publish %s: %v", room, err)
	}
	return a
}

// publishHeld starts a publish of two pages by room "r"'s attempt a and
// returns once the publish is inside Pin, held there; release lets it go on
// and answers its error.
func (f fixture) publishHeld(a Attempt) (release func() error) {
	f.pn.entered, f.pn.proceed = make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := f.Publish(context.Background(), "acme", "r", a, pages(2))
		done <- err
	}()
	<-f.pn.entered
	return func() error {
		close(f.pn.proceed)
		return <-done
	}
}

func (f fixture) take(t *testing.T, room string, a Attempt) Grant {
	t.Helper()
	g, err := f.Await(context.Background(), "acme", room, a, desc)
	if err != nil {
		t.Fatalf("await %s: %v", room, err)
	}
	return g
}

func (f fixture) state(t *testing.T, room string) State {
	t.Helper()
	st, err := f.Status("acme", room)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// TestOneLiveAttemptPerRoom: a second Open while an attempt lives is
// refused; the room is reusable after ack, after an abort that drained,
// and after expiry, each time with a larger attempt.
func TestOneLiveAttemptPerRoom(t *testing.T) {
	f := newFixture(t, Config{})
	a1 := f.openPublish(t, "r", 2)
	if _, err := f.Open("acme", "r"); !errors.Is(err, ErrRoomBusy) {
		t.Fatalf("second open of a published room: %v, want ErrRoomBusy", err)
	}
	f.take(t, "r", a1)
	if _, err := f.Open("acme", "r"); !errors.Is(err, ErrRoomBusy) {
		t.Fatalf("open of a room being loaded: %v, want ErrRoomBusy", err)
	}
	if err := f.Ack("acme", "r", a1); err != nil {
		t.Fatal(err)
	}
	a2, err := f.Open("acme", "r")
	if err != nil || a2 <= a1 {
		t.Fatalf("open after ack: attempt %d (after %d), %v", a2, a1, err)
	}
	// Another tenant's room of the same name is another room.
	if _, err := f.Open("other", "r"); err != nil {
		t.Fatalf("another tenant's room r: %v", err)
	}
	if _, err := f.Abort("acme", "r", a2, UserCancel, ""); err != nil {
		t.Fatal(err)
	}
	a3, err := f.Open("acme", "r")
	if err != nil || a3 <= a2 {
		t.Fatalf("open after an abort before publish: attempt %d (after %d), %v", a3, a2, err)
	}
	f.clk.add(31 * time.Second)
	f.Sweep()
	if got := f.state(t, "r"); got != Expired {
		t.Fatalf("an attempt never published past the open TTL is %s, want expired", got)
	}
	if a4, err := f.Open("acme", "r"); err != nil || a4 <= a3 {
		t.Fatalf("open after expiry: attempt %d (after %d), %v", a4, a3, err)
	}
	if s := f.Stats(); s.Busy != 2 || s.Opened != 5 {
		t.Fatalf("stats: %d busy, %d opened; want 2, 5", s.Busy, s.Opened)
	}
}

// TestAbortBeforePublishIsNonPublishing: an abort before publish, and an
// abort while the publish pins, leave nothing published or pinned.
func TestAbortBeforePublishIsNonPublishing(t *testing.T) {
	f := newFixture(t, Config{})
	a, _ := f.Open("acme", "r")
	f.Abort("acme", "r", a, ProducerFailure, "")
	if _, err := f.Publish(context.Background(), "acme", "r", a, pages(2)); !errors.Is(err, ErrAborted) {
		t.Fatalf("publish after abort: %v, want ErrAborted", err)
	}
	if f.pn.pins() != 0 || f.PinnedBytes("acme") != 0 {
		t.Fatalf("after a non-publishing publish: %d pins, %d bytes pinned", f.pn.pins(), f.PinnedBytes("acme"))
	}

	// The abort lands while Publish is inside Pin.
	a2, _ := f.Open("acme", "r")
	release := f.publishHeld(a2)
	if st, err := f.Abort("acme", "r", a2, UserCancel, "client went away"); err != nil || st != Aborted {
		t.Fatalf("abort during publish: %s, %v", st, err)
	}
	if err := release(); !errors.Is(err, ErrAborted) {
		t.Fatalf("publish that an abort overtook: %v, want ErrAborted", err)
	}
	if f.pn.pins() != 0 || f.PinnedBytes("acme") != 0 {
		t.Fatalf("the overtaken publish left %d pins, %d bytes pinned", f.pn.pins(), f.PinnedBytes("acme"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.Await(ctx, "acme", "r", a2, desc); !errors.Is(err, ErrAborted) {
		t.Fatalf("a consumer of the aborted attempt: %v, want ErrAborted", err)
	}
}

// TestAbortWhileLoadingDrains: an abort after the consumer took the pages
// keeps the pin and the room until the consumer's Ack (or the pin TTL).
func TestAbortWhileLoadingDrains(t *testing.T) {
	for _, end := range []string{"ack", "pin ttl"} {
		t.Run(end, func(t *testing.T) {
			f := newFixture(t, Config{})
			a := f.openPublish(t, "r", 3)
			f.take(t, "r", a)
			if st, err := f.Abort("acme", "r", a, Timeout, ""); err != nil || st != Draining {
				t.Fatalf("abort while loading: %s, %v; want draining", st, err)
			}
			if f.pn.pins() != 1 {
				t.Fatalf("an abort while the consumer reads released the pin: %d pins", f.pn.pins())
			}
			if _, err := f.Open("acme", "r"); !errors.Is(err, ErrRoomBusy) {
				t.Fatalf("open while draining: %v, want ErrRoomBusy", err)
			}
			if end == "ack" {
				if err := f.Ack("acme", "r", a); err != nil {
					t.Fatal(err)
				}
				if got := f.state(t, "r"); got != Aborted {
					t.Fatalf("drained attempt is %s, want aborted", got)
				}
			} else {
				f.clk.add(61 * time.Second)
				f.Sweep()
				if got := f.state(t, "r"); got != Expired {
					t.Fatalf("draining attempt past its pin TTL is %s, want expired", got)
				}
			}
			if f.pn.pins() != 0 || f.PinnedBytes("acme") != 0 {
				t.Fatalf("after the drain: %d pins, %d bytes pinned", f.pn.pins(), f.PinnedBytes("acme"))
			}
			if _, err := f.Open("acme", "r"); err != nil {
				t.Fatalf("open after the drain: %v", err)
			}
			if s := f.Stats(); s.Aborted[Timeout] != 1 {
				t.Fatalf("aborts by timeout: %d, want 1 (counted once)", s.Aborted[Timeout])
			}
		})
	}
}

// TestOldAttemptCannotTouchSuccessor: late and duplicate calls naming an
// old attempt leave the new one's state and pin alone.
func TestOldAttemptCannotTouchSuccessor(t *testing.T) {
	f := newFixture(t, Config{})
	a1 := f.openPublish(t, "r", 2)
	f.take(t, "r", a1)
	if err := f.Ack("acme", "r", a1); err != nil {
		t.Fatal(err)
	}
	if err := f.Ack("acme", "r", a1); err != nil {
		t.Fatalf("duplicate ack of the current attempt: %v, want a no-op", err)
	}
	a2 := f.openPublish(t, "r", 4)
	calls := map[string]func() error{
		"late publish":      func() error { _, err := f.Publish(context.Background(), "acme", "r", a1, pages(1)); return err },
		"duplicate cancel":  func() error { _, err := f.Abort("acme", "r", a1, UserCancel, ""); return err },
		"late ack":          func() error { return f.Ack("acme", "r", a1) },
		"old consumer":      func() error { _, err := f.Await(context.Background(), "acme", "r", a1, desc); return err },
		"unknown attempt":   func() error { return f.Ack("acme", "r", a2+1) },
		"late consumer ack": func() error { return f.Ack("acme", "r", a1) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrStaleAttempt) {
			t.Errorf("%s: %v, want ErrStaleAttempt", name, err)
		}
	}
	st, _ := f.Status("acme", "r")
	if st.Attempt != a2 || st.State != Published || st.Pages != 4 || f.pn.pins() != 1 {
		t.Fatalf("the successor after old calls: attempt %d %s, %d pages, %d pins; want %d published, 4 pages, 1 pin",
			st.Attempt, st.State, st.Pages, f.pn.pins(), a2)
	}
	// Duplicate cancel of the current attempt changes nothing either.
	f.take(t, "r", a2)
	f.Abort("acme", "r", a2, UserCancel, "")
	if st, err := f.Abort("acme", "r", a2, Timeout, ""); err != nil || st != Draining {
		t.Fatalf("second abort: %s, %v; want draining, no error", st, err)
	}
	if s, _ := f.Status("acme", "r"); s.Reason != UserCancel {
		t.Fatalf("the second abort replaced the reason: %s", s.Reason)
	}
}

// TestNoPartialPublish: a publish naming a page not committed fails,
// pins nothing and shows the consumer nothing; the producer may publish
// again once the page is there.
func TestNoPartialPublish(t *testing.T) {
	f := newFixture(t, Config{})
	a, _ := f.Open("acme", "r")
	p := pages(3)
	f.pn.missing[p.Keys[2]] = true
	if _, err := f.Publish(context.Background(), "acme", "r", a, p); err == nil || !strings.Contains(err.Error(), "not committed") {
		t.Fatalf("publish with a page missing: %v", err)
	}
	if f.pn.pins() != 0 || f.PinnedBytes("acme") != 0 || f.state(t, "r") != Open {
		t.Fatalf("after a failed publish: %d pins, %d bytes, %s", f.pn.pins(), f.PinnedBytes("acme"), f.state(t, "r"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Await(ctx, "acme", "r", a, desc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a consumer of a failed publish: %v, want to wait until its deadline", err)
	}
	delete(f.pn.missing, p.Keys[2])
	if _, err := f.Publish(context.Background(), "acme", "r", a, p); err != nil {
		t.Fatalf("publish once the page is committed: %v", err)
	}
	if g := f.take(t, "r", a); len(g.Pages.Keys) != 3 {
		t.Fatalf("the consumer got %d keys, want all 3", len(g.Pages.Keys))
	}
}

// TestAwaitWaitsForPublish: a consumer that comes first gets the pages
// when they are published, and its deadline when they are not.
func TestAwaitWaitsForPublish(t *testing.T) {
	f := newFixture(t, Config{})
	got := make(chan Grant)
	go func() {
		g, err := f.Await(context.Background(), "acme", "r", 0, desc)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	a := f.openPublish(t, "r", 2)
	if g := <-got; g.Attempt != a || len(g.Pages.Keys) != 2 || g.Pages.Tokens != 32 {
		t.Fatalf("grant %+v, want attempt %d with 2 keys and 32 tokens", g, a)
	}
	if _, err := f.Await(context.Background(), "acme", "r", a, desc); !errors.Is(err, ErrWrongState) {
		t.Fatalf("a second consumer of a taken attempt: %v, want ErrWrongState", err)
	}
}

// TestMismatchIsRefusedAndVisible: a consumer in another namespace is
// refused with the differing fields, the attempt aborts, the pin goes,
// and the producer sees why.
func TestMismatchIsRefusedAndVisible(t *testing.T) {
	f := newFixture(t, Config{})
	a := f.openPublish(t, "r", 2)
	other := desc
	other.ModelRevision, other.DType = "r2", "fp16"
	_, err := f.Await(context.Background(), "acme", "r", a, other)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "dtype") || !strings.Contains(err.Error(), "model_revision") {
		t.Fatalf("mismatched consumer: %v, want ErrMismatch naming dtype and model_revision", err)
	}
	st, _ := f.Status("acme", "r")
	if st.State != Aborted || st.Reason != ConsumerFailure || !strings.Contains(st.Detail, "dtype") || st.Mismatches != 1 {
		t.Fatalf("the producer sees %+v", st)
	}
	if f.pn.pins() != 0 || f.Stats().Mismatches != 1 {
		t.Fatalf("after a mismatch: %d pins, %d mismatches counted", f.pn.pins(), f.Stats().Mismatches)
	}
}

// TestPinQuota: a tenant's pinned bytes and the node's cap bound
// publishes; releasing makes room.
func TestPinQuota(t *testing.T) {
	f := newFixture(t, Config{MaxPinnedBytes: 8 << 10, TenantPinnedBytes: func(tenant string) uint64 {
		if tenant == "acme" {
			return 3 << 10
		}
		return 0
	}})
	a := f.openPublish(t, "r1", 2) // 2 KiB
	b, _ := f.Open("acme", "r2")
	if _, err := f.Publish(context.Background(), "acme", "r2", b, pages(2)); !errors.Is(err, ErrPinQuota) {
		t.Fatalf("publish over the tenant's quota: %v, want ErrPinQuota", err)
	}
	c, _ := f.Open("other", "r3")
	if _, err := f.Publish(context.Background(), "other", "r3", c, pages(7)); !errors.Is(err, ErrPinQuota) {
		t.Fatalf("publish over the node's cap: %v, want ErrPinQuota", err)
	}
	f.take(t, "r1", a)
	f.Ack("acme", "r1", a)
	if _, err := f.Publish(context.Background(), "acme", "r2", b, pages(2)); err != nil {
		t.Fatalf("publish once the first pin is released: %v", err)
	}
	if got := f.Stats().PinnedBytes; got != 2<<10 {
		t.Fatalf("pinned bytes %d, want %d", got, 2<<10)
	}
}

// TestEveryAbortReason: each reason, in each state, keeps the pin exactly
// while a consumer may read, and never lets the room be reused early.
func TestEveryAbortReason(t *testing.T) {
	for _, reason := range []Reason{UserCancel, Timeout, ProducerFailure, ConsumerFailure} {
		for _, at := range []State{Open, Published, Loading} {
			t.Run(reason.String()+"/"+at.String(), func(t *testing.T) {
				f := newFixture(t, Config{})
				a, _ := f.Open("acme", "r")
				if at >= Published {
					f.Publish(context.Background(), "acme", "r", a, pages(1))
				}
				if at == Loading {
					f.take(t, "r", a)
				}
				st, err := f.Abort("acme", "r", a, reason, "")
				if err != nil {
					t.Fatal(err)
				}
				wantPins, wantState := 0, Aborted
				if at == Loading {
					wantPins, wantState = 1, Draining
				}
				if st != wantState || f.pn.pins() != wantPins {
					t.Fatalf("abort at %s: %s with %d pins, want %s with %d", at, st, f.pn.pins(), wantState, wantPins)
				}
				if _, err := f.Open("acme", "r"); (err == nil) != (wantState == Aborted) {
					t.Fatalf("reopen after abort at %s: %v", at, err)
				}
				if f.Stats().Aborted[reason] != 1 {
					t.Fatalf("aborts counted for %s: %d", reason, f.Stats().Aborted[reason])
				}
			})
		}
	}
}

// TestTombstonesBounded: terminal records are kept for TombstoneTTL and
// at most MaxTombstones, and a forgotten record's late calls still change
// nothing.
func TestTombstonesBounded(t *testing.T) {
	f := newFixture(t, Config{MaxTombstones: 2, TombstoneTTL: time.Minute})
	var first Attempt
	for i := range 5 {
		a, _ := f.Open("acme", fmt.Sprint("r", i))
		if i == 0 {
			first = a
		}
		f.Abort("acme", fmt.Sprint("r", i), a, UserCancel, "")
	}
	f.Sweep()
	if s := f.Stats(); s.Tombstones != 2 || s.TombstonesDropped != 3 || len(f.List("acme")) != 2 {
		t.Fatalf("after 5 ended attempts with a cap of 2: %d kept, %d dropped, %d listed", s.Tombstones, s.TombstonesDropped, len(f.List("acme")))
	}
	if err := f.Ack("acme", "r0", first); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a call for a forgotten attempt: %v, want ErrNoRoom", err)
	}
	f.clk.add(time.Minute)
	f.Sweep()
	if s := f.Stats(); s.Tombstones != 0 || s.TombstonesDropped != 5 {
		t.Fatalf("past the tombstone TTL: %d kept, %d dropped", s.Tombstones, s.TombstonesDropped)
	}
}

// TestAttemptsOutliveRestart: a new Rooms (a restarted node) never hands
// out an attempt its predecessor did.
func TestAttemptsOutliveRestart(t *testing.T) {
	f := newFixture(t, Config{})
	a, _ := f.Open("acme", "r")
	f.clk.add(time.Millisecond)
	g := New(Config{Pinner: newPinner(), Now: f.clk.now})
	defer g.Close()
	if b, _ := g.Open("acme", "r"); b <= a {
		t.Fatalf("attempt after restart %d, before %d", b, a)
	}
}

// TestCloseReleasesAndWakes: Close releases pins and ends waits.
func TestCloseReleasesAndWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{})
		f.openPublish(t, "r", 2)
		done := make(chan error)
		go func() {
			_, err := f.Await(context.Background(), "acme", "other", 0, desc)
			done <- err
		}()
		synctest.Wait() // the consumer is waiting
		f.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("await across Close: %v", err)
		}
		if f.pn.pins() != 0 {
			t.Fatalf("%d pins after Close", f.pn.pins())
		}
	})
}

// TestTakerTakesItsGrantAgain: a consumer that names itself gets the
// grant it took again while it loads (its first answer was lost); another
// consumer, or one without a name, does not.
func TestTakerTakesItsGrantAgain(t *testing.T) {
	f := newFixture(t, Config{})
	a := f.openPublish(t, "r", 2)
	ctx := context.Background()
	g, err := f.AwaitAs(ctx, "acme", "r", 0, desc, "decode-7")
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.AwaitAs(ctx, "acme", "r", 0, desc, "decode-7")
	if err != nil || again.Attempt != a || len(again.Pages.Keys) != len(g.Pages.Keys) {
		t.Fatalf("the same taker's second await: %+v, %v; want attempt %d again", again, err, a)
	}
	for _, other := range []string{"decode-8", ""} {
		if _, err := f.AwaitAs(ctx, "acme", "r", 0, desc, other); !errors.Is(err, ErrWrongState) {
			t.Fatalf("taker %q: %v, want ErrWrongState", other, err)
		}
	}
	d := desc
	d.DType = "fp16"
	if _, err := f.AwaitAs(ctx, "acme", "r", 0, d, "decode-7"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("the same taker in another namespace: %v, want ErrMismatch", err)
	}
	if st := f.state(t, "r"); st != Loading || f.pn.pins() != 1 {
		t.Fatalf("after the re-takes: %s with %d pins, want loading with 1", st, f.pn.pins())
	}
	if err := f.Ack("acme", "r", a); err != nil {
		t.Fatal(err)
	}
}

// TestCloseDuringPublish: a publish whose pin lands after Close keeps
// nothing pinned.
func TestCloseDuringPublish(t *testing.T) {
	f := newFixture(t, Config{})
	a, _ := f.Open("acme", "r")
	release := f.publishHeld(a)
	f.Close()
	if err := release(); !errors.Is(err, ErrClosed) {
		t.Fatalf("a publish that Close overtook: %v, want ErrClosed", err)
	}
	if f.pn.pins() != 0 || f.PinnedBytes("acme") != 0 {
		t.Fatalf("after Close: %d pins, %d bytes pinned", f.pn.pins(), f.PinnedBytes("acme"))
	}
}

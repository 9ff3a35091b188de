package transfer

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratakv/strata/namespace"
)

// Attempt numbers one producer's try at a room. Attempts increase and are
// never reused; 0 is no attempt.
type Attempt uint64

// Reason says why an attempt was aborted.
type Reason uint8

// The four abort reasons of the seed's fencing model.
const (
	ReasonNone Reason = iota
	UserCancel
	Timeout
	ProducerFailure
	ConsumerFailure
	numReasons
)

var reasonNames = [numReasons]string{"none", "user_cancel", "timeout", "producer_failure", "consumer_failure"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ParseReason reads a Reason's String.
func ParseReason(s string) (Reason, error) {
	for i, n := range reasonNames {
		if n == s && i != 0 {
			return Reason(i), nil
		}
	}
	return ReasonNone, fmt.Errorf("%w: abort reason %q (want user_cancel, timeout, producer_failure or consumer_failure)", ErrBadRequest, s)
}

// State is where an attempt is in its life (the drawing in doc.go).
type State uint8

// An attempt's states; Acked, Aborted and Expired are terminal.
const (
	Open State = iota + 1
	Published
	Loading  // a consumer took the pages and may be reading them
	Draining // aborted while Loading: the pin holds until Ack or its TTL
	Acked
	Aborted
	Expired
)

var stateNames = [...]string{"", "open", "published", "loading", "draining", "acked", "aborted", "expired"}

func (s State) String() string {
	if int(s) < len(stateNames) && s != 0 {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Terminal reports whether the attempt is over: its room is reusable.
func (s State) Terminal() bool { return s >= Acked }

// Pages are what a producer publishes: its namespace, the keys of its
// committed pages in order, the tokens they hold and their bytes.
type Pages struct {
	Namespace namespace.Descriptor
	Keys      []namespace.Key
	Tokens    int
	Bytes     uint64
}

// A Pin holds published pages against eviction until Release.
type Pin interface{ Release() }

// Pinner pins the pages of a publish (the node's store, and the owners of
// pages held elsewhere: one call per owner node). Pin holds every page or
// none: it fails, pinning nothing, when a page is not committed.
type Pinner interface {
	Pin(ctx context.Context, tenant string, p Pages, ttl time.Duration) (Pin, error)
}

// Config configures Rooms.
type Config struct {
	// Pinner pins published pages; required.
	Pinner Pinner
	// OpenTTL is how long an opened attempt waits for its publish before
	// it expires (a producer that died between its puts and its publish).
	// Default 30 s.
	OpenTTL time.Duration
	// PinTTL is how long a publish pins its pages for the consumer: an
	// attempt not acknowledged by then expires and its pin is released.
	// Default 60 s.
	PinTTL time.Duration
	// MaxPinnedBytes caps the bytes pinned on the node by all tenants.
	// Default: no cap (the node sets it from its capacity).
	MaxPinnedBytes uint64
	// TenantPinnedBytes is a tenant's quota of pinned bytes. Default (nil,
	// or 0 for a tenant): MaxPinnedBytes.
	TenantPinnedBytes func(tenant string) uint64
	// MaxRooms caps the live (not terminal) rooms. Default 65,536.
	MaxRooms int
	// TombstoneTTL is how long a terminal record is kept, so that late
	// calls from its attempt are answered as stale. Default 5 min.
	TombstoneTTL time.Duration
	// MaxTombstones caps the terminal records kept; the oldest go first.
	// Default 65,536.
	MaxTombstones int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Acked, when set, is called with an attempt's record each time a
	// consumer's Ack ends it loaded (Published to Done is its
	// publish-to-loaded time), after the rooms' lock is released. The
	// node's metrics observe it. Default none.
	Acked func(Status)
}

// Status is an attempt's record as the CLI and the producer see it.
type Status struct {
	Tenant, Room string
	Attempt      Attempt
	State        State
	Reason       Reason // when aborted
	Detail       string // what the abort said, e.g. the fields a consumer's namespace differs in
	Pages        int
	Tokens       int
	Bytes        uint64
	Opened       time.Time
	Published    time.Time // zero until published
	Done         time.Time // zero until terminal
	PinExpires   time.Time // zero unless pinned
	Mismatches   int       // consumers refused for their namespace
}

// Grant is what a consumer gets: the attempt and its pages, pinned until
// PinExpires or its Ack.
type Grant struct {
	Attempt    Attempt
	Pages      Pages
	PinExpires time.Time
}

// Stats counts the rooms' outcomes since start.
type Stats struct {
	Live, Tombstones  int
	Waiting           int // consumers waiting in Await
	PinnedBytes       uint64
	Opened, Published uint64
	Acked, Expired    uint64
	AckedBytes        uint64             // bytes of the acknowledged attempts
	Aborted           [numReasons]uint64 // by Reason
	Mismatches        uint64
	Busy, Stale       uint64 // Opens refused for a live attempt; calls naming an old attempt
	TombstonesDropped uint64
}

// Rooms holds the transfer rooms of one node.
type Rooms struct {
	cfg Config

	// mu guards the fields below it.
	mu      sync.Mutex
	closed  bool
	rooms   map[string]*record
	tombs   []tomb // terminal records in the order they ended
	waiters map[string]chan struct{}
	next    Attempt
	pinned  uint64
	tenant  map[string]uint64 // pinned bytes by tenant
	live    int
	waiting int
	stats   Stats
}

type record struct {
	Status
	publishing bool   // a Publish is pinning, the lock released
	taker      string // the consumer that took the pages (AwaitAs), "" for an anonymous one
	pin        Pin
	pages      Pages // what was published
}

type tomb struct {
	key     string
	attempt Attempt
	done    time.Time
}

// New returns empty Rooms.
func New(cfg Config) *Rooms {
	if cfg.Pinner == nil {
		panic("transfer: Config.Pinner is required")
	}
	if cfg.OpenTTL <= 0 {
		cfg.OpenTTL = 30 * time.Second
	}
	if cfg.PinTTL <= 0 {
		cfg.PinTTL = 60 * time.Second
	}
	if cfg.MaxRooms <= 0 {
		cfg.MaxRooms = 1 << 16
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = 5 * time.Minute
	}
	if cfg.MaxTombstones <= 0 {
		cfg.MaxTombstones = 1 << 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Rooms{cfg: cfg, rooms: map[string]*record{}, waiters: map[string]chan struct{}{}, tenant: map[string]uint64{}}
}

func roomKey(tenant, room string) string { return tenant + "\x00" + room }

// Open starts a new attempt at the room for the producer and returns it.
func (r *Rooms) Open(tenant, room string) (Attempt, error) {
	if room == "" {
		return 0, fmt.Errorf("%w: empty room name", ErrBadRequest)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	now := r.cfg.Now()
	key := roomKey(tenant, room)
	if rec := r.rooms[key]; rec != nil && !rec.State.Terminal() {
		r.stats.Busy++
		return 0, fmt.Errorf("%w: room %q is at attempt %d, %s", ErrRoomBusy, room, rec.Attempt, rec.State)
	}
	if r.live >= r.cfg.MaxRooms {
		return 0, fmt.Errorf("%w: %d", ErrTooManyRooms, r.live)
	}
	// Attempts start from the clock so that a restarted node never hands
	// out a number its predecessor did.
	r.next = max(r.next+1, Attempt(now.UnixNano()))
	r.rooms[key] = &record{Status: Status{Tenant: tenant, Room: room, Attempt: r.next, State: Open, Opened: now}}
	r.live++
	r.stats.Opened++
	r.notifyLocked(key)
	return r.next, nil
}

// currentLocked returns the room's record when a names its current attempt.
func (r *Rooms) currentLocked(tenant, room string, a Attempt) (*record, error) {
	if r.closed {
		return nil, ErrClosed
	}
	rec := r.rooms[roomKey(tenant, room)]
	switch {
	case rec == nil:
		return nil, fmt.Errorf("%w: %q", ErrNoRoom, room)
	case rec.Attempt != a:
		r.stats.Stale++
		return nil, fmt.Errorf("%w: room %q is at attempt %d, not %d", ErrStaleAttempt, room, rec.Attempt, a)
	}
	return rec, nil
}

// endErr is the error a terminal or aborted record answers calls with.
func endErr(rec *record) error {
	switch rec.State {
	case Expired:
		return fmt.Errorf("%w: room %q attempt %d", ErrExpired, rec.Room, rec.Attempt)
	case Aborted, Draining:
		return fmt.Errorf("%w: room %q attempt %d: %s %s", ErrAborted, rec.Room, rec.Attempt, rec.Reason, rec.Detail)
	}
	return fmt.Errorf("%w: room %q attempt %d is %s", ErrWrongState, rec.Room, rec.Attempt, rec.State)
}

// Publish pins the producer's committed pages for the consumer and makes
// the attempt visible to it. It returns when the pin expires. An attempt
// aborted before Publish, or while it pins, publishes nothing.
func (r *Rooms) Publish(ctx context.Context, tenant, room string, a Attempt, p Pages) (time.Time, error) {
	if len(p.Keys) == 0 || p.Bytes == 0 || p.Tokens <= 0 {
		return time.Time{}, fmt.Errorf("%w: a publish names %d keys, %d bytes, %d tokens: want all above 0", ErrBadRequest, len(p.Keys), p.Bytes, p.Tokens)
	}
	r.mu.Lock()
	rec, err := r.currentLocked(tenant, room, a)
	if err == nil && (rec.State != Open || rec.publishing) {
		err = endErr(rec)
	}
	if err == nil {
		err = r.reserveLocked(tenant, p.Bytes)
	}
	if err != nil {
		r.mu.Unlock()
		return time.Time{}, err
	}
	rec.publishing = true
	r.mu.Unlock()

	pin, err := r.cfg.Pinner.Pin(ctx, tenant, p, r.cfg.PinTTL)

	r.mu.Lock()
	rec.publishing = false
	if err != nil {
		r.unreserveLocked(tenant, p.Bytes)
		r.mu.Unlock()
		return time.Time{}, fmt.Errorf("pinning %d pages of room %q attempt %d: %w", len(p.Keys), room, a, err)
	}
	if rec.State != Open || r.closed { // aborted, expired or closed while pinning: non-publishing
		r.unreserveLocked(tenant, p.Bytes)
		err = endErr(rec)
		if r.closed {
			err = ErrClosed
		}
		r.mu.Unlock()
		pin.Release()
		return time.Time{}, err
	}
	now := r.cfg.Now()
	rec.State, rec.pin = Published, pin
	rec.Pages, rec.Tokens, rec.Bytes = len(p.Keys), p.Tokens, p.Bytes
	rec.Published, rec.PinExpires = now, now.Add(r.cfg.PinTTL)
	rec.pages = p
	r.stats.Published++
	r.notifyLocked(roomKey(tenant, room))
	exp := rec.PinExpires
	r.mu.Unlock()
	return exp, nil
}

func (r *Rooms) quota(tenant string) uint64 {
	if r.cfg.TenantPinnedBytes != nil {
		if q := r.cfg.TenantPinnedBytes(tenant); q > 0 {
			return q
		}
	}
	return r.cfg.MaxPinnedBytes
}

func (r *Rooms) reserveLocked(tenant string, n uint64) error {
	if c := r.cfg.MaxPinnedBytes; c > 0 && r.pinned+n > c {
		return fmt.Errorf("%w: the node pins %d of %d bytes, the publish wants %d", ErrPinQuota, r.pinned, c, n)
	}
	if q := r.quota(tenant); q > 0 && r.tenant[tenant]+n > q {
		return fmt.Errorf("%w: tenant %q pins %d of %d bytes, the publish wants %d", ErrPinQuota, tenant, r.tenant[tenant], q, n)
	}
	r.pinned += n
	r.tenant[tenant] += n
	return nil
}

func (r *Rooms) unreserveLocked(tenant string, n uint64) {
	r.pinned -= n
	if r.tenant[tenant] -= n; r.tenant[tenant] == 0 {
		delete(r.tenant, tenant)
	}
}

// Await waits until the room has a published attempt (a, or whichever
// comes when a is 0) and gives it to the consumer, whose namespace must be
// the producer's. ctx bounds the wait.
func (r *Rooms) Await(ctx context.Context, tenant, room string, a Attempt, consumer namespace.Descriptor) (Grant, error) {
	return r.AwaitAs(ctx, tenant, room, a, consumer, "")
}

// AwaitAs is Await for a consumer that names itself with taker, a token
// of its choosing: while the attempt it took is loading, a later AwaitAs
// with the same taker is handed the same grant again. A grant whose answer
// never reached its consumer (a partition, an await whose request arrived
// after the consumer gave up on it) is then taken back by that consumer's
// next await instead of holding the room until the pin's TTL. Another
// consumer, or one without a taker, is refused (ErrWrongState).
func (r *Rooms) AwaitAs(ctx context.Context, tenant, room string, a Attempt, consumer namespace.Descriptor, taker string) (Grant, error) {
	if room == "" {
		return Grant{}, fmt.Errorf("%w: empty room name", ErrBadRequest)
	}
	key := roomKey(tenant, room)
	for {
		r.mu.Lock()
		g, wait, release, err := r.takeLocked(key, room, a, consumer, taker)
		var ch chan struct{}
		if wait {
			ch = r.waiterLocked(key)
			r.waiting++
		}
		r.mu.Unlock()
		if release != nil {
			release.Release()
		}
		if !wait {
			return g, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
		if ctx.Err() != nil {
			return Grant{}, fmt.Errorf("awaiting room %q: %w", room, context.Cause(ctx))
		}
	}
}

// takeLocked is one look of Await: the grant, or whether to wait, or the
// error; and a pin to release after the lock when a mismatch aborted the
// attempt.
func (r *Rooms) takeLocked(key, room string, a Attempt, consumer namespace.Descriptor, taker string) (Grant, bool, Pin, error) {
	if r.closed {
		return Grant{}, false, nil, ErrClosed
	}
	rec := r.rooms[key]
	switch {
	case rec == nil:
		return Grant{}, true, nil, nil // the producer has not opened it yet
	case a != 0 && rec.Attempt != a:
		r.stats.Stale++
		return Grant{}, false, nil, fmt.Errorf("%w: room %q is at attempt %d, not %d", ErrStaleAttempt, room, rec.Attempt, a)
	case rec.State == Open:
		return Grant{}, true, nil, nil
	case rec.State != Published && (rec.State != Loading || taker == "" || rec.taker != taker):
		return Grant{}, false, nil, endErr(rec)
	}
	// Published, or Loading and taken by this taker: its own grant again.
	if diff := namespace.LayoutDiff(rec.pages.Namespace, consumer); len(diff) > 0 {
		err := fmt.Errorf("%w: room %q attempt %d: fields %s", ErrMismatch, room, rec.Attempt, strings.Join(diff, ", "))
		if rec.State == Loading {
			return Grant{}, false, nil, err // the grant's first take stands
		}
		rec.Mismatches++
		r.stats.Mismatches++
		pin := r.endLocked(rec, Aborted, ConsumerFailure, "consumer namespace differs in "+strings.Join(diff, ", "))
		return Grant{}, false, pin, err
	}
	rec.State, rec.taker = Loading, taker
	r.notifyLocked(key)
	return Grant{Attempt: rec.Attempt, Pages: rec.pages, PinExpires: rec.PinExpires}, false, nil, nil
}

// Ack is the consumer's word that it has loaded the pages, or, after an
// abort, that it stopped reading them: the pin is released. A duplicate
// Ack of an acknowledged attempt is a no-op.
func (r *Rooms) Ack(tenant, room string, a Attempt) error {
	r.mu.Lock()
	rec, err := r.currentLocked(tenant, room, a)
	var pin Pin
	var acked *Status
	switch {
	case err != nil:
	case rec.State == Loading:
		pin = r.endLocked(rec, Acked, ReasonNone, "")
		st := rec.Status
		acked = &st
	case rec.State == Draining:
		pin = r.endLocked(rec, Aborted, rec.Reason, rec.Detail)
	case rec.State == Acked:
	default:
		err = endErr(rec)
	}
	r.mu.Unlock()
	if pin != nil {
		pin.Release()
	}
	if acked != nil && r.cfg.Acked != nil {
		r.cfg.Acked(*acked)
	}
	return err
}

// Abort ends the attempt for reason. An attempt whose pages a consumer
// took goes Draining: its pin holds until the consumer's Ack or the pin's
// TTL, since the consumer may still be reading. Aborting an ended or
// draining attempt changes nothing. It returns the attempt's state after.
func (r *Rooms) Abort(tenant, room string, a Attempt, reason Reason, detail string) (State, error) {
	if reason == ReasonNone || reason >= numReasons {
		return 0, fmt.Errorf("%w: abort reason %d", ErrBadRequest, reason)
	}
	r.mu.Lock()
	rec, err := r.currentLocked(tenant, room, a)
	var pin Pin
	var st State
	if err == nil {
		switch rec.State {
		case Open, Published:
			pin = r.endLocked(rec, Aborted, reason, detail)
		case Loading:
			rec.State, rec.Reason, rec.Detail = Draining, reason, detail
			r.stats.Aborted[reason]++
			r.notifyLocked(roomKey(tenant, room))
		}
		st = rec.State
	}
	r.mu.Unlock()
	if pin != nil {
		pin.Release()
	}
	return st, err
}

// endLocked makes rec terminal and returns its pin for the caller to
// release once the lock is dropped.
func (r *Rooms) endLocked(rec *record, st State, reason Reason, detail string) Pin {
	if rec.State != Draining && st == Aborted {
		r.stats.Aborted[reason]++
	}
	switch st {
	case Acked:
		r.stats.Acked++
		r.stats.AckedBytes += rec.Bytes
	case Expired:
		r.stats.Expired++
	}
	now := r.cfg.Now()
	rec.State, rec.Reason, rec.Detail, rec.Done = st, reason, detail, now
	pin := rec.pin
	if pin != nil {
		r.unreserveLocked(rec.Tenant, rec.Bytes)
	}
	rec.pin, rec.PinExpires = nil, time.Time{}
	r.live--
	key := roomKey(rec.Tenant, rec.Room)
	r.tombs = append(r.tombs, tomb{key: key, attempt: rec.Attempt, done: now})
	r.notifyLocked(key)
	return pin
}

// Sweep expires attempts never published within OpenTTL and pins past
// their TTL, and forgets tombstones past TombstoneTTL or over
// MaxTombstones. The node calls it on a ticker.
func (r *Rooms) Sweep() {
	r.mu.Lock()
	now := r.cfg.Now()
	var pins []Pin
	for _, rec := range r.rooms {
		switch {
		case rec.State == Open && !rec.publishing && now.Sub(rec.Opened) >= r.cfg.OpenTTL,
			(rec.State == Published || rec.State == Loading || rec.State == Draining) && !now.Before(rec.PinExpires):
			reason, detail := rec.Reason, rec.Detail
			if rec.State == Open {
				reason, detail = ProducerFailure, "not published within the open TTL"
			}
			if pin := r.endLocked(rec, Expired, reason, detail); pin != nil {
				pins = append(pins, pin)
			}
		}
	}
	drop := 0
	for drop < len(r.tombs) && (len(r.tombs)-drop > r.cfg.MaxTombstones || now.Sub(r.tombs[drop].done) >= r.cfg.TombstoneTTL) {
		t := r.tombs[drop]
		if rec := r.rooms[t.key]; rec != nil && rec.Attempt == t.attempt {
			delete(r.rooms, t.key)
		}
		r.stats.TombstonesDropped++
		drop++
	}
	r.tombs = append(r.tombs[:0], r.tombs[drop:]...)
	r.mu.Unlock()
	for _, p := range pins {
		p.Release()
	}
}

// Status returns the room's current record.
func (r *Rooms) Status(tenant, room string) (Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.rooms[roomKey(tenant, room)]; rec != nil {
		return rec.Status, nil
	}
	return Status{}, fmt.Errorf("%w: %q", ErrNoRoom, room)
}

// List returns the records of every room of tenant ("": every tenant),
// live and tombstones, oldest first.
func (r *Rooms) List(tenant string) []Status {
	r.mu.Lock()
	out := make([]Status, 0, len(r.rooms))
	for _, rec := range r.rooms {
		if tenant == "" || rec.Tenant == tenant {
			out = append(out, rec.Status)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int { return a.Opened.Compare(b.Opened) })
	return out
}

// Stats returns the counts since start.
func (r *Rooms) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Live, s.Tombstones, s.PinnedBytes, s.Waiting = r.live, len(r.tombs), r.pinned, r.waiting
	return s
}

// PinnedBytes returns the bytes tenant has pinned.
func (r *Rooms) PinnedBytes(tenant string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tenant[tenant]
}

// Close releases every pin and fails every waiting and later call.
func (r *Rooms) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var pins []Pin
	for _, rec := range r.rooms {
		if rec.pin != nil {
			pins = append(pins, rec.pin)
			r.unreserveLocked(rec.Tenant, rec.Bytes)
			rec.pin = nil
		}
	}
	for key := range r.waiters {
		r.notifyLocked(key)
	}
	r.mu.Unlock()
	for _, p := range pins {
		p.Release()
	}
}

// waiterLocked returns a channel closed at the room's next change.
func (r *Rooms) waiterLocked(key string) chan struct{} {
	ch := r.waiters[key]
	if ch == nil {
		ch = make(chan struct{})
		r.waiters[key] = ch
	}
	return ch
}

func (r *Rooms) notifyLocked(key string) {
	if ch := r.waiters[key]; ch != nil {
		close(ch)
		delete(r.waiters, key)
	}
}

// RoomKey is the placement key of a room: its record lives on the node
// that owns this key, found by producer and consumer alike.
func RoomKey(room string) namespace.Key {
	return namespace.Key(sha256.Sum256([]byte("strata transfer room\x00" + room)))
}

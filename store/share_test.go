package store

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// betaNS is a namespace of another tenant than testNS's.
var betaNS = Namespace{ID: namespace.ID{4, 5, 6}, Tenant: "beta", PageBytes: pageSize, Checksum: namespace.CRC32C}

// specs are the page specs of keys from, from+1, … (count of them).
func specs(from, count int) []PageSpec {
	out := make([]PageSpec, count)
	for i := range out {
		out[i] = PageSpec{Key: key(from + i), Size: pageSize}
	}
	return out
}

// statuses counts a Reserve's answers by status, and returns the first
// rejection's error.
func statuses(res []Reservation) (reserved, rejected int, why error) {
	for _, r := range res {
		switch r.Status {
		case Reserved:
			reserved++
		case Rejected:
			rejected++
			if why == nil {
				why = r.Err
			}
		}
	}
	return reserved, rejected, why
}

// TestReserveShare: with the default configuration, one tenant's Reserve
// of the whole tier for a day gets half of it (the rest Rejected with
// ErrQuota, saying why), and another tenant, with no quota either, still
// reserves and commits the other half. What a tenant has published is not
// bounded by the share, and aborting gives the share back.
func TestReserveShare(t *testing.T) {
	s, tier := newTestStore(t, 16, nil)
	if err := s.AddNamespace(betaNS); err != nil {
		t.Fatal(err)
	}
	res, err := s.Publisher().Reserve(testNS.ID, specs(0, 16), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reserved, rejected, why := statuses(res)
	if reserved != 8 || rejected != 8 {
		t.Fatalf("a tenant reserving the whole 16-page tier: %d reserved, %d rejected; want 8 and 8", reserved, rejected)
	}
	if !errors.Is(why, ErrQuota) || !strings.Contains(why.Error(), "reservation share") {
		t.Fatalf("the page past the share: %v", why)
	}
	t.Logf("past the share: %v", why)
	if d := time.Until(res[0].Deadline); d > s.cfg.MaxReserveTTL {
		t.Fatalf("a day's deadline came back %v away, past MaxReserveTTL", d)
	}

	theirs, err := s.Publisher().Reserve(betaNS.ID, specs(100, 8), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r, _, why := statuses(theirs); r != 8 {
		t.Fatalf("another tenant found room for %d of 8 pages beside the first's reservations: %v", r, why)
	}
	for i, r := range theirs {
		data := pageData(100 + i)
		if err := s.Publisher().Write(betaNS.ID, r.WriteID, 0, data); err != nil {
			t.Fatal(err)
		}
		if st, err := s.Publisher().Commit(betaNS.ID, r.WriteID, pageSize, betaNS.Checksum.Sum(data)); st != CommitCommitted || err != nil {
			t.Fatalf("beta's commit %d: %v, %v", i, st, err)
		}
	}
	if got := s.Admin().Usage()["beta"]; got.Bytes != 8*pageSize || got.ReserveBytes != 0 {
		t.Fatalf("beta's usage after its commits: %+v", got)
	}

	// The share bounds open reservations only: once acme aborts, it
	// publishes pages one at a time past half the tier, evicting.
	var wids []uint64
	for _, r := range res {
		if r.Status == Reserved {
			wids = append(wids, r.WriteID)
		}
	}
	if n, err := s.Publisher().Abort(testNS.ID, wids); n != 8 || err != nil {
		t.Fatalf("abort: %d, %v", n, err)
	}
	for i := range 12 {
		if st := put(t, s, key(200+i), pageData(200+i)); st != CommitCommitted {
			t.Fatalf("acme's put %d: %v", i, st)
		}
	}
	if got := s.Admin().Usage()["acme"]; got.Bytes != 12*pageSize || got.Reservations != 0 {
		t.Fatalf("acme's usage after its puts: %+v", got)
	}
	if tier.usedBytes() > 16*pageSize {
		t.Fatalf("the tier holds %d bytes of 16 pages", tier.usedBytes())
	}
}

// TestReserveShareTiers: a tenant at its share of the first tier has its
// pages reserved in the next, evicting nothing in the first; at its share
// of both, they are refused.
func TestReserveShareTiers(t *testing.T) {
	fast, slow := newMemTier(8*pageSize), newMemTier(8*pageSize)
	s := openStore(t, Config{Tiers: []tiers.Tier{fast, slow}}, testNS)
	res, err := s.Publisher().Reserve(testNS.ID, specs(0, 12), 0)
	if err != nil {
		t.Fatal(err)
	}
	var byTier [2]int
	s.lock()
	for _, r := range res {
		if r.Status == Reserved {
			byTier[s.reservations[r.WriteID].tier]++
		}
	}
	s.unlock()
	if byTier != [2]int{4, 4} {
		t.Fatalf("12 pages reserved over two 8-page tiers: %v by tier, want 4 and 4", byTier)
	}
	if _, rejected, why := statuses(res); rejected != 4 || !errors.Is(why, ErrQuota) {
		t.Fatalf("%d rejected (%v), want 4 over quota", rejected, why)
	}
}

// TestReserveShareGrant: granted slots count against the share of the
// tier they are in, by the size class they take there (a 1 KiB page takes
// 4 KiB of the host tier), and a page reserved past it lands in the next
// tier.
func TestReserveShareGrant(t *testing.T) {
	s, h, _ := newHostStore(t, 4) // 16 KiB: four 4 KiB extents of 1 KiB pages
	g, err := s.Publisher().Grant(testNS.ID, 4, 0, h)
	if len(g) != 2 || !errors.Is(err, ErrQuota) {
		t.Fatalf("4 slots asked of a 4-slot tier: %d granted, %v", len(g), err)
	}
	t.Logf("past the share: %v", err)
	res, _ := s.Publisher().Reserve(testNS.ID, specs(0, 1), 0)
	if res[0].Status != Reserved {
		t.Fatalf("a page beside slots that hold the share of the host tier: %+v", res[0])
	}
	s.lock()
	tier := s.reservations[res[0].WriteID].tier
	s.unlock()
	if tier != 1 {
		t.Fatalf("the page was reserved in tier %d, want the memory tier (1)", tier)
	}
}

// TestReserveShareWhole: a share of 1 lets one tenant reserve a whole
// tier (what every tenant could before the share).
func TestReserveShareWhole(t *testing.T) {
	s, _ := newTestStore(t, 16, func(c *Config) { c.ReserveShare = 1 })
	res, err := s.Publisher().Reserve(testNS.ID, specs(0, 16), 0)
	if err != nil {
		t.Fatal(err)
	}
	if reserved, _, why := statuses(res); reserved != 16 {
		t.Fatalf("share 1: %d of 16 reserved: %v", reserved, why)
	}
}

// TestReserveConfigErrors: a share outside (0, 1], or a default
// reservation deadline past the longest, is refused by New, naming it.
func TestReserveConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"negative share", func(c *Config) { c.ReserveShare = -0.5 }, "reserve share -0.5"},
		{"share past 1", func(c *Config) { c.ReserveShare = 1.5 }, "reserve share 1.5"},
		{"NaN share", func(c *Config) { c.ReserveShare = math.NaN() }, "reserve share NaN"},
		{"infinite share", func(c *Config) { c.ReserveShare = math.Inf(1) }, "reserve share +Inf"},
		{"default TTL past the longest", func(c *Config) { c.ReserveTTL, c.MaxReserveTTL = time.Minute, time.Second },
			"default reservation TTL 1m0s exceeds the maximum 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Tiers: []tiers.Tier{newMemTier(pageSize)}}
			tc.mod(&cfg)
			s, err := New(cfg)
			if err == nil {
				s.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestReserveShareSmallTier: in a tier whose share is less than a page, a
// tenant with nothing reserved there may still reserve one page, and no
// second.
func TestReserveShareSmallTier(t *testing.T) {
	s, _ := newTestStore(t, 3, nil) // a share of 1.5 pages
	res, err := s.Publisher().Reserve(testNS.ID, specs(0, 3), 0)
	if err != nil {
		t.Fatal(err)
	}
	if reserved, _, why := statuses(res); reserved != 1 || !errors.Is(why, ErrQuota) {
		t.Fatalf("3 pages in a 3-page tier at a share of 1.5: %d reserved (%v), want 1", reserved, why)
	}
	one, _ := newTestStore(t, 1, nil) // a share of half a page
	if res, _ := one.Publisher().Reserve(testNS.ID, specs(0, 1), 0); res[0].Status != Reserved {
		t.Fatalf("the one page of a one-page tier: %+v", res[0])
	}
}

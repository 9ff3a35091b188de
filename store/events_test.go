package store

import (
	"slices"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// applyEvents is a consumer's index: the keys an event stream says are
// present.
type applyEvents map[namespace.Key]bool

func (a applyEvents) apply(t *testing.T, e Event) {
	t.Helper()
	switch e.Kind {
	case EventStored:
		if a[e.Key] {
			t.Errorf("page %x reported stored twice", e.Key[:6])
		}
		a[e.Key] = true
	case EventRemoved:
		if !a[e.Key] {
			t.Errorf("page %x reported removed while absent", e.Key[:6])
		}
		delete(a, e.Key)
	case EventCleared:
		clear(a)
	}
}

// TestEventsFollowContents: the events OnEvent receives through puts
// (their PutInfo once, with the commit), evictions, a delete and a
// namespace drop rebuild the store's keys exactly, each change reported
// once.
func TestEventsFollowContents(t *testing.T) {
	var got []Event
	s, _ := newTestStore(t, 4, func(c *Config) { c.OnEvent = func(e Event) { got = append(got, e) } })
	info := &PutInfo{Tokens: []uint32{1, 2, 3}, LoraName: "adapter"}
	wid := reserve(t, s, key(0)) // an aborted reservation reports nothing
	if _, err := s.Publisher().Abort(testNS.ID, []uint64{wid}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Publisher().Put(testNS.ID, PageSpec{Key: key(0), Size: pageSize, Info: info}, testNS.Checksum.Sum(pageData(0)), 0,
		func(write func([]byte) error) error { return write(pageData(0)) })
	if err != nil || !res.Committed() {
		t.Fatalf("put: %+v %v", res, err)
	}
	if len(got) != 1 || got[0].Kind != EventStored || got[0].Info != info || got[0].Tenant != "acme" || got[0].Tier != s.cfg.Tiers[0].Kind() {
		t.Fatalf("after one put: events %+v", got)
	}
	for i := 1; i < 10; i++ { // 4 pages of room: evictions
		if st := put(t, s, key(i), pageData(i)); st != CommitCommitted {
			t.Fatalf("put %d: %v", i, st)
		}
	}
	if _, err := s.Publisher().Delete(testNS.ID, []namespace.Key{key(9)}); err != nil {
		t.Fatal(err)
	}
	idx := applyEvents{}
	for _, e := range got {
		idx.apply(t, e)
	}
	infos, _, err := s.Admin().ListKeys(testNS.ID, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var want, have []namespace.Key
	for _, in := range infos {
		want = append(want, in.Key)
	}
	for k := range idx {
		have = append(have, k)
	}
	slices.SortFunc(want, func(a, b namespace.Key) int { return slices.Compare(a[:], b[:]) })
	slices.SortFunc(have, func(a, b namespace.Key) int { return slices.Compare(a[:], b[:]) })
	if !slices.Equal(want, have) || len(want) == 0 {
		t.Fatalf("events say %d keys, the store lists %d", len(have), len(want))
	}
	n := len(got)
	if _, err := s.Admin().DropNamespace(testNS.ID); err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 || got[n].Kind != EventCleared || got[n].Namespace != testNS.ID {
		t.Fatalf("a drop reported %+v, want one EventCleared", got[n:])
	}
}

package load

import (
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/poll"
)

// TestEventsDrained: a strata system with Events, its node in a process of
// its own, publishes a BlockStored for each page of the working set its
// Prepare puts, and its subscriber reads every one; the system is named
// strata-events.
func TestEventsDrained(t *testing.T) {
	sys, err := StartStrata(t.Context(), StrataConfig{Events: true, Label: "events", HostBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if sys.Name() != "strata-events" {
		t.Errorf("name %q", sys.Name())
	}
	const pages = 40
	wl, err := sys.Prepare(t.Context(), Params{PageBytes: 4 << 10, Pages: pages, Workers: 1, LookupKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close(t.Context())
	poll.Until(t, 10*time.Second, 5*time.Millisecond, "the subscriber to read a BlockStored per page put", func() bool {
		_, n := sys.EventsReceived()
		return n >= pages
	})
	if _, err := StartStrata(t.Context(), StrataConfig{Events: true, Addr: "127.0.0.1:1"}); err == nil {
		t.Error("events on an external node: started")
	}
}

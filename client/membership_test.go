package client_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
)

// TestRestartedNodeRawAgain: a client that opened a namespace before its
// node restarted (same gRPC address, a new raw port) learns the new raw
// address from the membership view and goes back to the raw plane within
// seconds, without opening anything again.
func TestRestartedNodeRawAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := node.Config{DataDir: dir, Listen: "127.0.0.1:" + strconv.Itoa(testnode.FreePort(t)),
		EmbeddedEtcdURL: "http://127.0.0.1:" + strconv.Itoa(testnode.FreePort(t)), HostBytes: 16 << 20}
	n := testnode.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, n.Addr(), client.Options{NoShm: true, NodeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := open(t, c)
	keys := ns.PageKeys(tokens(16*4, 1))
	lookupRaw := func() bool {
		if !c.RawActive() { // dials the raw plane (a lookup alone uses it once a connection is up)
			return false
		}
		before := c.RawLookups()
		if _, err := ns.Lookup(ctx, keys, false, 0); err != nil {
			return false
		}
		return c.RawLookups() > before
	}
	if !lookupRaw() {
		t.Fatal("lookups do not use the raw plane before the restart")
	}
	oldRaw := n.RawAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = testnode.Start(t, cfg)
	if n.RawAddr() == oldRaw {
		t.Skipf("the restarted node got its old raw port %s back; nothing to re-learn", oldRaw)
	}
	began := time.Now()
	poll.Until(t, 15*time.Second, 50*time.Millisecond, "lookups back on the raw plane after the restart", lookupRaw)
	t.Logf("raw plane again %v after the restart (old %s, new %s)", time.Since(began).Round(time.Millisecond), oldRaw, n.RawAddr())
	var raw string
	for _, m := range c.Members() {
		raw = m.RawAddress
	}
	if raw != n.RawAddr() {
		t.Fatalf("view says raw address %q, node serves %q", raw, n.RawAddr())
	}
}

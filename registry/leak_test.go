package registry

import (
	"context"
	"testing"
	"time"

	"github.com/stratakv/strata/internal/testing/leaktest"
)

// TestNoGoroutineLeak runs a whole embedded etcd and registry lifecycle
// twice and checks that the second leaves no goroutine behind (the first
// warms up process-wide goroutines such as gRPC's). It is not parallel:
// goroutines are counted process-wide.
func TestNoGoroutineLeak(t *testing.T) {
	lifecycle := func() {
		t.Helper()
		e, err := StartEmbedded(ctxFor(t, 20*time.Second), EmbeddedConfig{Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		p := newProxy(t, e.Endpoints()[0])
		defer p.close()
		r, err := Open(ctxFor(t, 10*time.Second), Config{Endpoints: []string{p.endpoint()}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor(t, 10*time.Second)
		if err := r.RegisterNode(ctx, Node{ID: "n"}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.PutNamespace(ctx, NamespaceRecord{ID: hexID('f'), Tenant: "t", Canonical: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Nodes(ctx); err != nil {
			t.Fatal(err)
		}
		// Campaign, publish and watch cutoffs.
		cand, err := r.Campaign(CandidateConfig{NodeID: "n", TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "leading alone", func() bool { return cand.Term().Leading() })
		wctx, wcancel := context.WithCancel(ctx)
		watch := r.WatchCutoffs(wctx)
		if err := r.PublishCutoffs(ctx, cand.Term(), Cutoffs{Round: 1}); err != nil {
			t.Fatal(err)
		}
		<-watch
		// Let the client run into a lost connection too.
		refused := p.refusals()
		p.cut()
		eventually(t, 10*time.Second, "the client redialing into the cut", func() bool { return p.refusals() > refused })
		p.heal()
		wcancel()
		for range watch {
		}
		if err := cand.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}

	leaktest.Twice(t, lifecycle)
}

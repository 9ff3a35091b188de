package node

import (
	"context"
	"fmt"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stratakv/strata/registry"
)

// Starting without etcd.
//
// A node whose external etcd cannot be reached at start (registry.Open
// fails with ErrUnavailable) does not fail: it starts degraded from its
// local copy of the registry (localcopy.go). It recovers its SSD pages as
// always, restores the namespaces it served (so clients that had them open
// are served, and a client that opens one of them again is answered
// without etcd), joins the gossip peers it last knew, and serves. Without
// etcd it cannot register new namespaces (OpenNamespace of an unknown one
// fails with the registry reason), take part in the coordinator election
// (it uses local cutoffs, as coord does whenever cutoffs go stale) or be
// found by nodes that look peers up in etcd. Health says so: the gRPC
// health service RegistryHealthService is NOT_SERVING, /healthz answers
// "degraded: ..." and NodeInfo reports etcd unhealthy with the reason.
//
// rejoinRegistry, owned by the node (Close stops it and waits), tries to
// reach etcd every rejoinEvery. When it answers, the node registers, puts
// the namespaces it served while degraded into etcd (idempotent), adopts
// the namespaces etcd has, joins the peers etcd lists, starts coordination
// and turns healthy. A namespace registered meanwhile by another node with
// the same ID is the same namespace (content addressed), so the merge
// cannot conflict.
//
// The embedded etcd is not a reason to start degraded: it lives in the
// data directory, and a failure to start it is an error.

// RegistryHealthService is the gRPC health service name that reports
// whether the node reaches etcd: NOT_SERVING while the node runs degraded.
// The overall service ("") stays SERVING: the node serves pages either way.
const RegistryHealthService = "strata.registry"

// rejoinEvery is how long rejoinRegistry waits between attempts.
const rejoinEvery = time.Second

// Degraded reports whether the node runs without etcd (see above).
func (n *Node) Degraded() bool { return n.degraded.Load() }

// rejoinRegistry reaches etcd again for a node that started degraded.
func (n *Node) rejoinRegistry() {
	defer n.wg.Done()
	t := time.NewTicker(rejoinEvery)
	defer t.Stop()
	for attempt := 1; ; attempt++ {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		reg, err := registry.Open(n.ctx, n.registryConfig(n.cfg.EtcdEndpoints))
		if err == nil {
			if err = n.attach(n.ctx, reg); err != nil {
				reg.Close()
			}
		}
		if err == nil {
			n.log.Info("etcd reachable again: node registered, no longer degraded", "attempts", attempt)
			return
		}
		if n.ctx.Err() != nil {
			return
		}
		n.log.Debug("etcd still unreachable", "attempt", attempt, "err", err)
	}
}

// attach makes reg the node's registry: register, merge namespaces both
// ways, join the peers etcd lists, start coordination, turn healthy.
func (n *Node) attach(ctx context.Context, reg *registry.Registry) error {
	for _, rec := range n.copy.namespaces() {
		if _, err := reg.PutNamespace(ctx, rec); err != nil {
			return fmt.Errorf("registering namespace %s: %w", rec.ID, err)
		}
	}
	recs, err := reg.Namespaces(ctx, "")
	if err != nil {
		return fmt.Errorf("loading namespaces: %w", err)
	}
	seeds, err := n.peers(ctx, reg)
	if err != nil {
		return err
	}
	if err := n.register(ctx, reg); err != nil {
		return err
	}
	n.restore(n.srv, recs)
	if len(seeds) > 0 && len(n.cfg.Join) == 0 {
		if _, err := n.members.Join(ctx, seeds); err != nil {
			n.log.Warn("joining the peers registered in etcd", "err", err)
		}
	}
	n.reg.Store(reg)
	if err := n.startCoord(reg); err != nil {
		n.log.Error("starting eviction coordination after etcd returned; using local cutoffs", "err", err)
	}
	n.degraded.Store(false)
	n.health.SetServingStatus(RegistryHealthService, healthpb.HealthCheckResponse_SERVING)
	return nil
}

// refreshCopy rewrites the local copy from etcd (the namespaces, the
// peers) and self; a failure is logged: the old copy stays.
func (n *Node) refreshCopy(ctx context.Context, reg *registry.Registry, self registry.Node) {
	recs, err := reg.Namespaces(ctx, "")
	var peers []string
	if err == nil {
		peers, err = n.peers(ctx, reg)
	}
	if err == nil {
		err = n.copy.reset(self, recs, peers)
	}
	if err != nil {
		n.log.Warn("refreshing the local copy of the registry", "err", err)
	}
}

// keep records a namespace in the local copy (logged on failure).
func (n *Node) keep(rec registry.NamespaceRecord) {
	if err := n.copy.addNamespace(rec); err != nil {
		n.log.Warn("recording a namespace in the local copy of the registry", "ns", rec.ID, "err", err)
	}
}

// healthText is what /healthz answers.
func (n *Node) healthText() string {
	if n.degraded.Load() {
		return "degraded: etcd unreachable; serving the namespaces known locally"
	}
	return "ok"
}

package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
)

// The node and its registry (etcd): opening it (embedded or external, or
// degraded when the external one is unreachable: degraded.go), the
// node's registration, the namespaces restored from it at start, and
// registryAdapter, through which the server records and looks up
// namespaces.

// register records the node in etcd and refreshes the local copy from it.
func (n *Node) register(ctx context.Context, reg *registry.Registry) error {
	self := n.registration()
	if err := reg.RegisterNode(ctx, self); err != nil {
		return fmt.Errorf("registering node: %w", err)
	}
	n.refreshCopy(ctx, reg, self)
	return nil
}

// registration is the node's record in etcd.
func (n *Node) registration() registry.Node {
	return registry.Node{ID: n.id, GRPCAddress: n.addr,
		GossipAddress: n.members.GossipAddress(), AdminAddress: n.AdminAddr(),
		StartedUnixMs: time.Now().UnixMilli(), Version: Version, Tiers: n.tierInfo()}
}

// openRegistry opens the registry: on the embedded etcd it starts when
// there are no endpoints (failing to start it is an error), or on the
// external one. An external etcd that cannot be reached leaves the node
// degraded (reg nil) rather than failing the start.
func (n *Node) openRegistry(ctx context.Context) error {
	endpoints := n.cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		var err error
		n.etcd, err = registry.StartEmbedded(ctx, registry.EmbeddedConfig{Dir: filepath.Join(n.cfg.DataDir, "etcd"),
			ClientURL: n.cfg.EmbeddedEtcdURL, Logger: n.log})
		if err != nil {
			return err
		}
		endpoints = n.etcd.Endpoints()
	}
	reg, err := registry.Open(ctx, n.registryConfig(endpoints))
	if err != nil && n.etcd == nil && errors.Is(err, registry.ErrUnavailable) {
		n.degraded.Store(true)
		n.log.Warn("etcd unreachable: starting degraded from the local copy of the registry; will register when it answers",
			"etcd", strings.Join(endpoints, ","), "namespaces", len(n.copy.namespaces()), "peers", len(n.copy.peers()), "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	n.reg.Store(reg)
	return nil
}

func (n *Node) registryConfig(endpoints []string) registry.Config {
	return registry.Config{Endpoints: endpoints, DialTimeout: n.cfg.EtcdDialTimeout, Logger: n.log}
}

func (n *Node) endpoints() []string {
	if n.etcd != nil {
		return n.etcd.Endpoints()
	}
	return n.cfg.EtcdEndpoints
}

// restoreNamespaces makes the namespaces in the registry (or, degraded,
// in the local copy) known again, so a restarted node answers for them
// before any client re-opens them.
func (n *Node) restoreNamespaces(ctx context.Context, srv *server.Server) error {
	recs := n.copy.namespaces()
	if reg := n.reg.Load(); reg != nil {
		var err error
		if recs, err = reg.Namespaces(ctx, ""); err != nil {
			return fmt.Errorf("loading namespaces: %w", err)
		}
	}
	n.restore(srv, recs)
	return nil
}

func (n *Node) restore(srv *server.Server, recs []registry.NamespaceRecord) {
	for _, r := range recs {
		d, err := namespace.Decode(r.Canonical)
		if err == nil {
			err = srv.Restore(d)
		}
		if err != nil {
			n.log.Warn("skipping registered namespace", "ns", r.ID, "err", err)
		}
	}
}

func (n *Node) tierInfo() []registry.TierInfo {
	var out []registry.TierInfo
	for _, t := range n.tiers {
		st := t.Stats()
		out = append(out, registry.TierInfo{Kind: st.Kind.String(), Capacity: st.Capacity, Used: st.Used})
	}
	return out
}

// registryAdapter records namespaces in the registry for the server, and
// in the node's local copy; while the node is degraded (no registry) it
// fails with registry.ErrUnavailable.
type registryAdapter struct{ n *Node }

// errDegraded says why a registry call fails while the node is degraded.
var errDegraded = fmt.Errorf("degraded: etcd was unreachable at start; serving the namespaces known locally: %w",
	registry.ErrUnavailable)

func (a registryAdapter) reg() (*registry.Registry, error) {
	if r := a.n.reg.Load(); r != nil {
		return r, nil
	}
	return nil, errDegraded
}

func (a registryAdapter) Health(ctx context.Context) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	return r.Health(ctx)
}

// DeleteNamespace removes a namespace's registration (strata ns rm).
func (a registryAdapter) DeleteNamespace(ctx context.Context, id namespace.ID) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	if err := r.DeleteNamespace(ctx, id.String()); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	return nil
}

func (a registryAdapter) Lookup(ctx context.Context, id namespace.ID) (namespace.Descriptor, error) {
	r, err := a.reg()
	if err != nil {
		return namespace.Descriptor{}, err
	}
	rec, err := r.Namespace(ctx, id.String())
	if err != nil {
		return namespace.Descriptor{}, err
	}
	d, err := namespace.Decode(rec.Canonical)
	if err == nil {
		a.n.keep(rec)
	}
	return d, err
}

func (a registryAdapter) Endpoints() []string { return a.n.endpoints() }

func (a registryAdapter) RegisterNamespace(ctx context.Context, d namespace.Descriptor) error {
	r, err := a.reg()
	if err != nil {
		return err
	}
	rec := registry.NamespaceRecord{ID: d.ID().String(), Tenant: d.Tenant,
		Canonical: d.Canonical(), CreatedUnixMs: time.Now().UnixMilli()}
	if _, err := r.PutNamespace(ctx, rec); err != nil {
		return err
	}
	a.n.keep(rec)
	return nil
}

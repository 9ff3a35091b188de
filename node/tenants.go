package node

import (
	"context"
	"time"

	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/store"
)

// Tenants in etcd. The registry holds each tenant's token hash, role and
// quota (registry.Tenant, managed with `strata tenant`); a node reads them
// at start and every TenantPoll after, so a token revoked or rotated in
// etcd is refused on every node within a poll (and the next request of a
// raw or shm connection that used it), and a changed quota holds from the
// next reservation or lease on. The --tenant-token flags (Config.
// TenantTokens) stay in force beside them, for a single embedded node.
// etcd unreachable: the tenants last read stay in force (logged); a node
// that starts degraded (node/degraded.go) has only the flags' tokens until
// it reaches etcd, and with none it is open meanwhile: the local copy of
// the registry does not keep tenants.

// loadTenants reads the tenants from etcd and puts their tokens and
// quotas in force beside the flags'.
func (n *Node) loadTenants(ctx context.Context) error {
	var ts []registry.Tenant
	if reg := n.reg.Load(); reg != nil { // nil: degraded (etcd unreachable), the flags' tokens alone
		var err error
		if ts, err = reg.Tenants(ctx); err != nil {
			return err
		}
	}
	tokens := hashTokens(n.cfg.TenantTokens)
	var admins []string
	quotas := map[string]store.Quota{}
	for _, t := range ts {
		if t.Admin {
			admins = append(admins, t.TokenSHA256)
			continue
		}
		tokens[t.TokenSHA256] = t.Name
		if t.Quota != (registry.Quota{}) {
			quotas[t.Name] = quotaOf(t.Quota)
		}
	}
	n.srv.SetTokens(tokens, admins)
	n.store.SetQuotas(quotas)
	return nil
}

func quotaOf(q registry.Quota) store.Quota {
	return store.Quota{Bytes: q.Bytes, ReserveBytes: q.ReserveBytes, Reservations: q.Reservations,
		Leases: q.Leases, MaxLeaseTTL: time.Duration(q.MaxLeaseTTLMs) * time.Millisecond}
}

// watchTenants re-reads the tenants every TenantPoll until Close.
func (n *Node) watchTenants() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.TenantPoll)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.TenantPoll)
		if err := n.loadTenants(ctx); err != nil {
			n.log.Warn("tenants: keeping those in force", "err", err)
		}
		cancel()
	}
}

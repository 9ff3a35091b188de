package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stratakv/strata/registry"
	"github.com/stratakv/strata/server"
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
	seen := make(map[string]string, len(ts))
	for _, t := range ts {
		seen[t.Name] = fmt.Sprintf("%s admin=%v quota=%+v", t.TokenSHA256, t.Admin, t.Quota)
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
	n.setEventTokens(tokens, admins)
	n.store.Admin().SetQuotas(quotas)
	n.auditTenants(seen)
	return nil
}

// auditTenants writes the tenant changes since the last read to the audit
// log (the first read is the start, not a change).
func (n *Node) auditTenants(seen map[string]string) {
	if n.tenants != nil {
		for name, v := range seen {
			if old, ok := n.tenants[name]; !ok {
				n.audit.Info("audit", "who", "etcd", "op", "tenant added", "tenant", name)
			} else if old != v {
				n.audit.Info("audit", "who", "etcd", "op", "tenant changed (token, role or quota)", "tenant", name)
			}
		}
		for name := range n.tenants {
			if _, ok := seen[name]; !ok {
				n.audit.Info("audit", "who", "etcd", "op", "tenant removed", "tenant", name)
			}
		}
	}
	n.tenants = seen
}

// openAudit opens Config.AuditLog for appending (0600), or uses the logger.
func (n *Node) openAudit() error {
	if n.cfg.AuditLog == "" {
		n.audit = n.log
		return nil
	}
	f, err := os.OpenFile(n.cfg.AuditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the audit log: %w", err)
	}
	n.auditF = f
	n.audit = slog.New(slog.NewJSONHandler(f, nil)).With("node", n.id)
	return nil
}

func quotaOf(q registry.Quota) store.Quota {
	return store.Quota{Bytes: q.Bytes, ReserveBytes: q.ReserveBytes, Reservations: q.Reservations,
		Leases: q.Leases, MaxLeaseTTL: time.Duration(q.MaxLeaseTTLMs) * time.Millisecond}
}

// watchTenants re-reads the tenants every TenantPoll until Close.
func (n *Node) watchTenants() {
	n.every(n.cfg.TenantPoll, func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.TenantPoll)
		defer cancel()
		if err := n.loadTenants(ctx); err != nil {
			n.log.Warn("tenants: keeping those in force", "err", err)
		}
	})
}

func hashTokens(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for tok, tenant := range m {
		out[server.HashToken(tok)] = tenant
	}
	return out
}

func hashOptional(tok string) string {
	if tok == "" {
		return ""
	}
	return server.HashToken(tok)
}

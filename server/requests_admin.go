package server

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The request layer's operator and cluster side (requests.go): what the
// Admin and Cluster services ask of the store. What a caller may see is
// decided here: a tenant's token sees its own tenant's namespaces, leases
// and usage; the admin's token (or anyone on an open node) every one.

// namespaces are the namespaces caller c may see; only tenant's when
// tenant is not "".
func (s *Server) namespaces(c caller, tenant string) []store.NamespaceStats {
	return visible(c, tenant, s.cfg.Store.Admin().Namespaces(), func(st store.NamespaceStats) string { return st.Tenant })
}

// visible are the items caller c may see, each of the tenant tenantOf
// names; only tenant's when tenant is not "".
func visible[T any](c caller, tenant string, items []T, tenantOf func(T) string) []T {
	var out []T
	for _, it := range items {
		if t := tenantOf(it); c.mayUse(t) == nil && (tenant == "" || tenant == t) {
			out = append(out, it)
		}
	}
	return out
}

// tierKinds are the kinds of the store's tiers, fastest first.
func (s *Server) tierKinds() []tiers.Kind { return s.cfg.Store.Admin().TierKinds() }

// listKeys pages through n's keys in key order, after after (nil: from
// the first); limit 0, or one over Config.MaxBatch, asks for the smaller
// of 1000 and Config.MaxBatch. next is where the next page starts, nil
// after the last.
func (s *Server) listKeys(n store.Namespace, after *namespace.Key, limit int) (infos []store.KeyInfo, next *namespace.Key, err error) {
	if limit <= 0 || limit > s.cfg.MaxBatch {
		limit = min(1000, s.cfg.MaxBatch)
	}
	return s.cfg.Store.Admin().ListKeys(n.ID, after, limit)
}

// stat describes keys of n; ok[i] is false for a key n does not hold.
func (s *Server) stat(n store.Namespace, keys []namespace.Key) (infos []store.KeyInfo, ok []bool, err error) {
	return s.cfg.Store.Admin().Stat(n.ID, keys)
}

// storeStats is what the store holds, as a whole and per tier.
func (s *Server) storeStats() store.Stats { return s.cfg.Store.Admin().Stats() }

// openReservations counts the store's open reservations and granted
// slots, as a whole, per tier and per tenant.
func (s *Server) openReservations() store.OpenStats { return s.cfg.Store.Admin().OpenReservations() }

// usage is what each tenant that caller c may see holds.
func (s *Server) usage(c caller) map[string]store.Usage {
	u := s.cfg.Store.Admin().Usage()
	for t := range u {
		if c.mayUse(t) != nil {
			delete(u, t)
		}
	}
	return u
}

// leases are the store's active read leases that caller c may see, soonest
// expiry first; only tenant's when tenant is not "".
func (s *Server) leases(c caller, tenant string) []store.LeaseInfo {
	return visible(c, tenant, s.cfg.Store.Admin().Leases(), func(l store.LeaseInfo) string { return l.Tenant })
}

// dropNamespace drops namespace id's pages from the store and forgets its
// descriptor, answering how many pages it dropped; a namespace the store
// no longer has (dropped meanwhile) drops none.
func (s *Server) dropNamespace(id namespace.ID) (int, error) {
	dropped, err := s.cfg.Store.Admin().DropNamespace(id)
	if err != nil && !errors.Is(err, store.ErrNamespaceNotFound) {
		return 0, err
	}
	s.mu.Lock()
	delete(s.descriptors, id)
	s.mu.Unlock()
	return dropped, nil
}

// maxTTLMs is the longest TTL setTTL accepts: what a time.Duration holds.
const maxTTLMs = math.MaxInt64 / uint64(time.Millisecond)

// setTTL sets how long a page of n may go without a lookup before the
// store removes it (0: forever), answering the TTL before and n after.
func (s *Server) setTTL(n store.Namespace, ttlMs uint64) (before time.Duration, after store.NamespaceStats, err error) {
	if ttlMs > maxTTLMs {
		return 0, after, badRequest("ttl of %d ms: the most is %d", ttlMs, maxTTLMs)
	}
	was, err := s.cfg.Store.Admin().NamespaceStats(n.ID)
	if err != nil {
		return 0, after, err
	}
	if err := s.cfg.Store.Admin().SetTTL(n.ID, time.Duration(ttlMs)*time.Millisecond); err != nil {
		return 0, after, err
	}
	after, err = s.cfg.Store.Admin().NamespaceStats(n.ID)
	return was.TTL, after, err
}

// checkHints refuses a batch of count remote-child hints from caller c
// unless c is the admin (the nodes use the admin token), when the node
// checks tokens, or when it is over Config.MaxBatch.
func (s *Server) checkHints(c caller, count int) error {
	if !c.admin {
		return fmt.Errorf("child hints are for nodes: %w", errDenied)
	}
	return s.checkLimit(count, "hints")
}

// applyHints applies remote-child hints (store.ApplyHints); hints for
// namespaces not here are for other nodes.
func (s *Server) applyHints(hints []store.ChildHint) { s.cfg.Store.Evictor().ApplyHints(hints) }

// prefixTiers is how many of keys, from the first, n holds, and the tier
// of each of those (store.Admin.PrefixTiers).
func (s *Server) prefixTiers(n store.Namespace, keys []namespace.Key) (longest int, tier []uint8, err error) {
	tier = make([]uint8, len(keys))
	longest, err = s.cfg.Store.Admin().PrefixTiers(n.ID, keys, tier)
	return longest, tier, err
}

// keyTiers is, for each of keys, 1 + the index of the tier n holds it in,
// or 0 (store.Admin.KeyTiers).
func (s *Server) keyTiers(n store.Namespace, keys []namespace.Key) ([]uint8, error) {
	tier := make([]uint8, len(keys))
	_, err := s.cfg.Store.Admin().KeyTiers(n.ID, keys, tier)
	return tier, err
}

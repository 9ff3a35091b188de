package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Lease is a promise that the pages it covers stay readable until Expires.
type Lease struct {
	ID      uint64
	Expires time.Time
	Pages   int
}

type lease struct {
	ns      *nsState
	entries []*entry
	expires time.Time
	pin     bool // a transfer pin (Reader.Pin): not among the tenant's leases
}

// LookupResult answers a Lookup.
type LookupResult struct {
	// HitPrefix is how many keys from the start are present.
	HitPrefix int
	// Present says, per key, whether it is published.
	Present []bool
	// Lease covers the hit prefix when one was asked for and HitPrefix > 0.
	Lease *Lease
	// SavedFLOPs is the prefill the hit prefix saves: each page priced at
	// its depth by the namespace's compute profile (0 without one), so
	// that nodes holding parts of one prompt add up to the whole.
	SavedFLOPs float64
	// HitTokens is the tokens in the hit prefix (0 when the namespace's
	// page tokens are unknown).
	HitTokens int
}

// Lookup reports which keys are published and how many from the start. With
// withLease it also leases the hit prefix for ttl (0 = default, capped at
// Config.MaxLeaseTTL). A lookup counts as a use of the pages it finds; it
// never extends an existing lease.
func (r Reader) Lookup(id namespace.ID, keys []namespace.Key, withLease bool, ttl time.Duration) (LookupResult, error) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return LookupResult{}, err
	}
	found := getEntries(len(keys))
	defer putEntries(found)
	n.getAll(keys, found)
	now := s.clock(time.Now())
	hitPrefix := len(keys)
	for i, e := range found {
		if e == nil {
			hitPrefix = i
			break
		}
	}
	n.lookups.Add(1)
	n.lookupKeys.Add(uint64(len(keys)))
	if withLease || slices.ContainsFunc(found[min(hitPrefix+1, len(found)):], func(e *entry) bool { return e != nil }) {
		// A lease pins its pages under s.mu, and a page present past the
		// first miss may be an orphan, which takes its parent's key
		// (parentKeyLocked): both answer under s.mu.
		return s.lookupLocked(n, keys, found, now, withLease, ttl)
	}
	// The index alone answers; logLookup does the bookkeeping (hitlog.go).
	res := LookupResult{Present: make([]bool, len(keys)), HitPrefix: hitPrefix,
		HitTokens: hitPrefix * int(n.PageTokens), SavedFLOPs: n.savedBy(found[:hitPrefix])}
	for i := range hitPrefix {
		res.Present[i] = true
	}
	n.hitKeys.Add(uint64(hitPrefix))
	n.hitTokens.Add(uint64(res.HitTokens))
	s.logLookup(n, now, keys, found[:hitPrefix], res.SavedFLOPs)
	return res, nil
}

// lookupLocked answers a lookup under s.mu: one that takes a lease, or
// whose present pages past the hit prefix may be orphans.
func (s *Store) lookupLocked(n *nsState, keys []namespace.Key, found []*entry, now int32, withLease bool, ttl time.Duration) (LookupResult, error) {
	res := LookupResult{Present: make([]bool, len(keys)), HitPrefix: -1}
	s.lock()
	defer s.unlock()
	s.recordKeysLocked(keys)
	for i, e := range found {
		if e == nil || e.dead {
			if res.HitPrefix < 0 {
				res.HitPrefix = i
			}
			continue
		}
		res.Present[i] = true
		e.access = now
		e.hits++
	}
	if res.HitPrefix < 0 {
		res.HitPrefix = len(keys)
	}
	res.SavedFLOPs = s.recordLookupLocked(n, keys, found, res.HitPrefix)
	res.HitTokens = res.HitPrefix * int(n.PageTokens)
	n.hitKeys.Add(uint64(res.HitPrefix))
	if withLease && res.HitPrefix > 0 {
		l, err := s.grantLeaseLocked(n, found[:res.HitPrefix], ttl)
		if err != nil {
			return LookupResult{}, err
		}
		res.Lease = &l
	}
	return res, nil
}

// entryLists holds the scratch lists of entries that lookups fill: a
// 1,000-key lookup would otherwise allocate 8 KB for it, and a node's Go
// heap is small (the pages live in tiers), so every such allocation brings
// the next collection closer.
var entryLists sync.Pool

// getEntries is a list of n nil entries, for putEntries when done.
func getEntries(n int) []*entry {
	if p, _ := entryLists.Get().(*[]*entry); p != nil && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]*entry, n)
}

// putEntries clears found, so that it keeps no page alive, and keeps it
// for the next lookup.
func putEntries(found []*entry) {
	clear(found)
	entryLists.Put(&found)
}

func (s *Store) grantLeaseLocked(n *nsState, entries []*entry, ttl time.Duration) (Lease, error) {
	if s.tenantLeases[n.Tenant] >= s.cfg.MaxLeasesPerTenant {
		return Lease{}, fmt.Errorf("tenant %q holds %d leases: %w", n.Tenant, s.cfg.MaxLeasesPerTenant, ErrLeaseLimit)
	}
	longest, err := s.leaseQuotaLocked(n.Tenant)
	if err != nil {
		return Lease{}, err
	}
	l := &lease{ns: n, entries: append([]*entry(nil), entries...),
		expires: time.Now().Add(clampTTL(ttl, s.cfg.DefaultLeaseTTL, s.maxLeaseTTL(longest)))}
	for _, e := range l.entries {
		s.pinLocked(e)
		e.leases++
	}
	id := s.newIDLocked()
	s.leases[id] = l
	s.tenantLeases[n.Tenant]++
	n.leases.Add(1)
	return Lease{ID: id, Expires: l.expires, Pages: len(l.entries)}, nil
}

// maxLeaseTTL is the store's cap, or a tenant's shorter one (quota; 0:
// none).
func (s *Store) maxLeaseTTL(quota time.Duration) time.Duration {
	if quota > 0 {
		return min(quota, s.cfg.MaxLeaseTTL)
	}
	return s.cfg.MaxLeaseTTL
}

// liveLeaseLocked finds a lease of namespace n that has not expired. A
// lease found past its expiry is ended on the spot.
func (s *Store) liveLeaseLocked(n *nsState, id uint64) (*lease, error) {
	l := s.leases[id]
	if l == nil || l.ns != n {
		if _, ok := s.expiredLeases.get(id); ok && l == nil {
			return nil, fmt.Errorf("lease %d: %w", id, ErrLeaseExpired)
		}
		return nil, fmt.Errorf("lease %d: %w", id, ErrLeaseNotFound)
	}
	if time.Now().After(l.expires) {
		s.expireLeaseLocked(id, l)
		return nil, fmt.Errorf("lease %d: %w", id, ErrLeaseExpired)
	}
	return l, nil
}

// RenewLease extends a live lease to ttl from now (0 = default, capped).
func (r Reader) RenewLease(id namespace.ID, leaseID uint64, ttl time.Duration) (Lease, error) {
	s := r.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return Lease{}, err
	}
	defer s.unlock()
	l, err := s.liveLeaseLocked(n, leaseID)
	if err != nil {
		return Lease{}, err
	}
	l.expires = time.Now().Add(clampTTL(ttl, s.cfg.DefaultLeaseTTL, s.maxLeaseTTL(s.quotas[n.Tenant].MaxLeaseTTL)))
	return Lease{ID: leaseID, Expires: l.expires, Pages: len(l.entries)}, nil
}

// ReleaseLease ends a lease early, unpinning its pages.
func (r Reader) ReleaseLease(id namespace.ID, leaseID uint64) error {
	s := r.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return err
	}
	defer s.unlock()
	l, err := s.liveLeaseLocked(n, leaseID)
	if err == nil {
		s.endLeaseLocked(leaseID, l)
	}
	return err
}

func (s *Store) expireLeaseLocked(id uint64, l *lease) {
	s.endLeaseLocked(id, l)
	s.expiredLeases.add(id, struct{}{})
	l.ns.leasesExpired.Add(1)
}

func (s *Store) endLeaseLocked(id uint64, l *lease) {
	for _, e := range l.entries {
		e.leases--
		s.unpinLocked(e)
	}
	delete(s.leases, id)
	if l.pin {
		l.ns.pins.Add(-1)
		return
	}
	s.tenantLeases[l.ns.Tenant]--
	l.ns.leases.Add(-1)
}

// pinLocked keeps an entry from being reclaimed: its policy never offers a
// pinned page as a victim.
func (s *Store) pinLocked(e *entry) {
	if e.pins == 0 && !e.dead {
		s.policy.pol[e.tier].Pin(e.h)
	}
	e.pins++
}

func (s *Store) unpinLocked(e *entry) {
	e.pins--
	if e.pins > 0 {
		return
	}
	if e.dead {
		s.cfg.Tiers[e.tier].Free(e.extent())
		return
	}
	s.policy.pol[e.tier].Unpin(e.h)
}

// PageView is one page handed to a Read callback. Data is valid only during
// the callback.
type PageView struct {
	Found    bool
	Size     int64
	Checksum []byte
	Data     []byte
}

// Read hands each key's page to fn in order, pinning each page only while
// fn runs on it: a reader that stalls (a client that stops reading) keeps
// one page from being reclaimed, not the whole batch, and a page removed
// before its turn is passed as not found. With a lease id (non-zero) the
// lease must be live: an expired one fails the whole read with
// ErrLeaseExpired (the pages it covers are pinned by the lease itself).
// Pages not present are passed with Found false. fn's error stops the read
// and is returned.
func (r Reader) Read(id namespace.ID, leaseID uint64, keys []namespace.Key, fn func(i int, p PageView) error) error {
	s := r.s
	n, err := s.namespace(id)
	if err != nil {
		return err
	}
	found := make([]*entry, len(keys))
	n.getAll(keys, found)
	if leaseID != 0 {
		s.lock()
		_, err := s.liveLeaseLocked(n, leaseID)
		s.unlock()
		if err != nil {
			return err
		}
	}
	var buf []byte
	var pinned *entry // the page fn last ran on: unpinned with the next pin
	defer func() {
		if pinned != nil {
			s.lock()
			s.unpinLocked(pinned)
			s.unlock()
		}
	}()
	for i, e := range found {
		ext, ok := s.repin(pinned, e)
		pinned = nil
		if !ok {
			if err := fn(i, PageView{}); err != nil {
				return err
			}
			continue
		}
		pinned = e
		data, good := s.readPage(e, ext, buf)
		if _, mapped := s.cfg.Tiers[e.tier].(tiers.Mapped); !mapped && data != nil {
			buf = data // reuse the copy buffer for the next page
		}
		view := PageView{}
		if good {
			view = PageView{Found: true, Size: ext.Len, Checksum: e.checksum(), Data: data}
		}
		if err := fn(i, view); err != nil {
			return err
		}
	}
	return nil
}

// repin unpins prev (the page a read last handed out; nil: none) and pins e
// if it is a live page, returning its extent, in one hold of the lock: a
// read takes the lock once per page. The extent is read under the lock (a
// pinned page's extent changes only when it is deleted, which retires its
// generation: tiers.Retirer).
func (s *Store) repin(prev, e *entry) (tiers.Extent, bool) {
	if prev == nil && e == nil {
		return tiers.Extent{}, false
	}
	s.lock()
	defer s.unlock()
	if prev != nil {
		s.unpinLocked(prev)
	}
	if e == nil || e.dead {
		return tiers.Extent{}, false
	}
	s.pinLocked(e)
	return e.extent(), true
}

// readPage returns a pinned page's bytes. Bytes from a tier outside this
// process's memory (ssd, gpu) are checked against the page's checksum: a
// page that fails to read or verify is dropped, logged and counted, and
// reads as a miss, never as wrong bytes.
func (s *Store) readPage(e *entry, ext tiers.Extent, buf []byte) ([]byte, bool) {
	t := s.cfg.Tiers[e.tier]
	data, err := s.pageBytes(int(e.tier), ext, buf)
	if _, mapped := t.(tiers.Mapped); mapped && err == nil {
		return data, true
	}
	if err == nil && bytes.Equal(e.ns.Checksum.Sum(data), e.checksum()) {
		return data, true
	}
	if err == nil {
		err = errors.New("bytes do not match the page checksum")
	}
	s.log.Error("dropping unreadable page", "ns", e.ns.ID.Short(), "key", e.key.String(), "tier", t.Kind(), "err", err)
	s.corrupt.Add(1)
	e.ns.corrupt.Add(1)
	s.lock()
	if !e.dead {
		s.removeLocked(e, false)
	}
	s.unlock()
	return data, false
}

// Delete removes published pages and returns how many it removed. A leased
// page disappears from lookups at once; its memory returns when the lease
// ends. Children of a removed page stay (they wait for it to be put again);
// a removed page with children on other nodes sends a parent-gone notice.
func (pub Publisher) Delete(id namespace.ID, keys []namespace.Key) (int, error) {
	return pub.s.remove(id, keys, false)
}

// Handed removes pages this node gave to their owner (the hinted handoff
// of peer): as Delete, but no parent-gone notice goes out for
// them, since they are not gone (their owner holds them, and children on
// other nodes stay reachable), and they are counted apart (Handed).
func (h Handoff) Handed(id namespace.ID, keys []namespace.Key) (int, error) {
	return h.s.remove(id, keys, true)
}

func (s *Store) remove(id namespace.ID, keys []namespace.Key, handed bool) (int, error) {
	n, err := s.lockNamespace(id)
	if err != nil {
		return 0, err
	}
	defer s.unlock()
	s.handing = handed
	defer func() { s.handing = false }()
	deleted := 0
	for _, k := range keys {
		if e := n.shard(k).get(k); e != nil {
			s.removeLocked(e, false)
			if handed {
				n.handed.Add(1)
			} else {
				n.deleted.Add(1)
			}
			deleted++
		}
	}
	return deleted, nil
}

package store

import (
	"errors"
	"fmt"
	"math"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// Recovery reports what Recover found on the durable tiers.
type Recovery struct {
	Tiers []tiers.RecoveryStats // per durable tier, in tier order
	// Namespaces lists namespaces that had pages but were not added
	// before Recover; they are known from the pages alone (no tenant) until
	// AddNamespace completes them.
	Namespaces []namespace.ID
}

var errDuplicate = errors.New("page already recovered from another slot")

// Recover rebuilds the index from the durable tiers' sealed pages. Call it
// once, after adding the namespaces the node knows and before serving.
// Pages of namespaces not yet added are kept under a namespace known only by
// ID, page size and checksum; AddNamespace with a matching descriptor later
// completes it.
func (s *Store) Recover() (Recovery, error) {
	var rec Recovery
	seen := map[namespace.ID]bool{}
	for i, t := range s.cfg.Tiers {
		d, ok := t.(tiers.Durable)
		if !ok {
			continue
		}
		st, err := d.Recover(func(ext tiers.Extent, m tiers.PageMeta) error {
			n, added, err := s.recoveredNamespace(m)
			if err != nil {
				return err
			}
			if added && !seen[n.ID] {
				seen[n.ID] = true
				rec.Namespaces = append(rec.Namespaces, n.ID)
			}
			return s.insertRecovered(n, i, ext, m)
		})
		rec.Tiers = append(rec.Tiers, st)
		if err != nil {
			return rec, fmt.Errorf("recovering %s tier: %w", t.Kind(), err)
		}
		s.log.Info("recovered tier", "tier", t.Kind(), "pages", st.Recovered, "bytes", st.Bytes,
			"dropped", st.Dropped, "torn", st.Torn)
	}
	return rec, nil
}

// recoveredNamespace finds the namespace of a recovered page, creating a
// placeholder when it is not known yet.
func (s *Store) recoveredNamespace(m tiers.PageMeta) (*nsState, bool, error) {
	id := namespace.ID(m.Namespace)
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if n, ok := s.ns[id]; ok {
		if n.PageBytes != m.Len || uint8(n.Checksum) != m.ChecksumAlg {
			return nil, false, fmt.Errorf("page of namespace %s: %d bytes with checksum %d, namespace has %d and %d",
				id.Short(), m.Len, m.ChecksumAlg, n.PageBytes, n.Checksum)
		}
		return n, false, nil
	}
	n := newNSState(Namespace{ID: id, PageBytes: m.Len, Checksum: namespace.Checksum(m.ChecksumAlg)})
	n.placeholder = true
	s.ns[id] = n
	return n, true, nil
}

func (s *Store) insertRecovered(n *nsState, tier int, ext tiers.Extent, m tiers.PageMeta) error {
	if len(m.Checksum) != n.Checksum.Size() {
		return fmt.Errorf("page %x: %d-byte checksum", m.Key[:6], len(m.Checksum))
	}
	created := s.clock(m.Created)
	if ext.Len != n.PageBytes || ext.Cap < ext.Len || ext.Cap-ext.Len > math.MaxUint32 {
		return fmt.Errorf("page %x: extent %+v for %d-byte pages", m.Key[:6], ext, n.PageBytes)
	}
	e := newEntry(n, m.Key, ext)
	e.depth, e.tier, e.create, e.access, e.cost = m.Depth, uint8(tier), created, created, m.Cost
	s.lock()
	defer s.unlock()
	if !s.insertLocked(e, m.Parent, m.HasParent, m.Checksum, 0) {
		return errDuplicate
	}
	s.storedLocked(e, m.Parent, m.HasParent, nil)
	return nil
}

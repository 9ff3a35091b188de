package store

import "github.com/stratakv/strata/namespace"

// TakeBackLookup takes one lookup of keys keys back out of namespace id's
// lookup counters: a lookup a client asked of this node after the keys'
// owner, which lacked them and counted them already (a probe: client
// Options.FallbackWindow), so that the cluster's lookups and looked-up keys
// count each engine lookup once. Its hits stay counted: the pages are
// served from here. An unknown namespace takes nothing back.
func (r Reader) TakeBackLookup(id namespace.ID, keys int) {
	s := r.s
	n, err := s.namespace(id)
	if err != nil || keys <= 0 {
		return
	}
	n.lookups.Add(^uint64(0))
	n.lookupKeys.Add(^uint64(keys - 1))
}

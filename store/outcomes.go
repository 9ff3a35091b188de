package store

import "github.com/stratakv/strata/namespace"

// How finished reservations ended is remembered (Config.RecentOutcomes of
// them, the oldest forgotten first), so that a repeated commit answers
// what the first one did, whichever connection or plane repeats it, and a
// late write is told expired or closed rather than unknown. Each outcome
// is kept with its namespace and told only to requests of that namespace
// (so of the tenant that owns it): to any other, a finished write id is
// one never issued.

// writeOutcome is how a finished reservation ended, and in which namespace.
type writeOutcome struct {
	ns namespace.ID
	st CommitStatus
}

// rememberLocked records that reservation wid, r, ended with st.
func (s *Store) rememberLocked(wid uint64, r *reservation, st CommitStatus) {
	s.writeOutcomes.add(wid, writeOutcome{ns: r.ns.ID, st: st})
}

// rememberedLocked is how write wid of namespace n ended, if the store
// remembers it.
func (s *Store) rememberedLocked(n *nsState, wid uint64) (CommitStatus, bool) {
	o, ok := s.writeOutcomes.get(wid)
	if !ok || o.ns != n.ID {
		return 0, false
	}
	return o.st, true
}

// Outcome answers a commit of writeID by a caller that may not commit it
// (a frame connection that does not hold the reservation): what the
// reservation's commit answered, or why it ended otherwise (expired,
// aborted), while the store remembers it, waiting for a commit in flight;
// CommitUnknownWrite for a reservation or slot still open, and for a write
// id of another namespace, never issued or forgotten. It changes nothing.
func (pub Publisher) Outcome(id namespace.ID, writeID uint64) (CommitStatus, error) {
	s := pub.s
	n, err := s.lockNamespace(id)
	if err != nil {
		return 0, err
	}
	r := s.reservations[writeID]
	if r != nil && r.ns == n && r.committing {
		s.unlock()
		<-r.done
		return r.outcome, nil
	}
	st, ok := s.rememberedLocked(n, writeID)
	s.unlock()
	if !ok || r != nil {
		return CommitUnknownWrite, nil
	}
	return st, nil
}

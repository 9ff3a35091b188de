package eviction

// Freq is h's reuse count: what a demotion carries to the next tier's
// queue as Page.Freq.
func (q *Queue) Freq(h Handle) uint32 { return q.live(h).freq }

// PassChildWorth raises parent's best-descendant worth (see SetChildWorth)
// to what child, tracked by from (this queue or another tier's), is worth
// now, if that is more than parent is worth, and reports whether it did.
// It is SetChildWorth(parent, from.Worth(child)) done in the queues' log
// domain, without the exponentials, for the store's per-page hot path. A
// no-op (false) unless both queues are KindCost.
func (q *Queue) PassChildWorth(parent Handle, from *Queue, child Handle) bool {
	if q.kind != KindCost || from.kind != KindCost {
		return false
	}
	p, c := q.live(parent), from.live(child)
	sub := c.eff() - from.age() + q.age()
	if sub <= p.eff() {
		return false
	}
	p.sub = sub
	q.fix(parent)
	return true
}

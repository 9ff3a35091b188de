package eviction

// Freq is h's reuse count: what a demotion carries to the next tier's
// queue as Page.Freq.
func (q *Queue) Freq(h Handle) uint32 { return q.live(h).freq }

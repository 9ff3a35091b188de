package eviction

// entry is one heap slot. It carries its page's sort key, so that sifting
// reads only the heap array; the page's state is touched once per move.
//
// A slot's key may be stale, but only ever behind: a page whose key moves
// back (a hit raises its priority) keeps its slot (Queue.fix), and the
// heap is ordered by the keys in the slots. So every page's true key is at
// least its slot's, and once the top slot holds its page's true key
// (settle), that page is the true minimum. Each hit then costs nothing in
// the heap, instead of a sift down its whole depth with a cache miss per
// level (30% of a node's CPU on 1,000-key lookups, perf); a page pays one
// sift when it reaches the top, for all the hits before.
type entry struct {
	prio float64
	h    Handle
	ct   uint32 // class<<30 | tick mod 2^30
}

func (e *entry) before(f *entry) bool {
	if ca, cb := e.ct>>30, f.ct>>30; ca != cb {
		return ca < cb
	}
	if e.prio != f.prio {
		return e.prio < f.prio
	}
	return int32(e.ct<<2-f.ct<<2) < 0
}

// less orders pages as the heap does: class, then priority, then older use
// first.
func (q *Queue) less(a, b Handle) bool {
	ea, eb := q.entryOf(a), q.entryOf(b)
	return ea.before(&eb)
}

func (q *Queue) entryOf(h Handle) entry {
	s := &q.pages[h]
	return entry{prio: s.eff(), h: h, ct: q.class(s)<<30 | s.tick&(1<<30-1)}
}

func (q *Queue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.pages[q.heap[i].h].pos = int32(i)
	q.pages[q.heap[j].h].pos = int32(j)
}

// up sifts heap[i] towards the root and reports whether it moved.
func (q *Queue) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !q.heap[i].before(&q.heap[p]) {
			break
		}
		q.swap(i, p)
		i, moved = p, true
	}
	return moved
}

// settle brings the true key of the page at the top into its slot and
// sifts it down, until the top slot is current. It reports whether the
// heap has a page.
func (q *Queue) settle() bool {
	for len(q.heap) > 0 {
		h := q.heap[0].h
		e := q.entryOf(h)
		if e == q.heap[0] {
			return true
		}
		q.heap[0] = e
		q.down(0)
		if q.heap[0].h == h { // still first, with its key now current
			return true
		}
	}
	return false
}

func (q *Queue) down(i int) {
	n := len(q.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.heap[r].before(&q.heap[l]) {
			m = r
		}
		if !q.heap[m].before(&q.heap[i]) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

func (q *Queue) heapRemove(i int) {
	last := len(q.heap) - 1
	h := q.heap[i].h
	if i != last {
		q.swap(i, last)
	}
	q.heap = q.heap[:last]
	q.pages[h].pos = -1
	if i != last {
		if !q.up(i) {
			q.down(i)
		}
	}
}

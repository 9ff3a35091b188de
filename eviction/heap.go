package eviction

// entry is one heap slot. It carries its page's sort key, so that sifting
// reads only the heap array; the page's state is touched once per move.
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

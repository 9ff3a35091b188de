package store

// recent remembers the last n ids with a value, forgetting the oldest first.
// It is not safe for concurrent use; the store guards it with Store.mu.
type recent[V any] struct {
	m    map[uint64]V
	ring []uint64
	next int
}

func newRecent[V any](n int) *recent[V] {
	return &recent[V]{m: make(map[uint64]V, n), ring: make([]uint64, n)}
}

func (r *recent[V]) add(id uint64, v V) {
	if _, ok := r.m[id]; !ok {
		if old := r.ring[r.next]; old != 0 {
			delete(r.m, old)
		}
		r.ring[r.next] = id
		r.next = (r.next + 1) % len(r.ring)
	}
	r.m[id] = v
}

func (r *recent[V]) get(id uint64) (V, bool) {
	v, ok := r.m[id]
	return v, ok
}

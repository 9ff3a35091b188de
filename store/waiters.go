package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"math"

	"github.com/stratakv/strata/namespace"
)

// waiters is a namespace's waiters (kids.go): a slab of them by index (0
// unused; freed indexes are reused) and an open-addressing index from a
// parent key to its waiter's index (linear probing, deletion by backward
// shift, no tombstones; 0 marks an empty slot), whose keys stay in the
// slab. A waiter costs its 44 bytes and 4-byte index slots at a load
// factor between 3/8 and 3/4: 59 bytes a waiter at 1M of them with the
// slab's growth (BenchmarkIndexBytesRemoteParents, a node none of whose
// pages' parents is resident, so that it keeps one for every page), where
// a map[namespace.Key]uint32 beside the slab took 134, and the
// map[namespace.Key] of counts and list head that waiters replace, 100.
//
// The hash is seeded per table (hash/maphash): parent keys come from
// clients, who could otherwise pick keys whose probe runs are long. The
// index is never iterated in an order that decides anything.
//
// Guarded by Store.mu.
type waiters struct {
	seed  maphash.Seed
	slab  []waiter
	free  []uint32
	slots []uint32 // len a power of two, or 0
	n     int
}

func newWaiters() waiters { return waiters{seed: maphash.MakeSeed(), slab: make([]waiter, 1)} }

func (ws *waiters) home(k *namespace.Key) uint64 {
	return maphash.Bytes(ws.seed, k[:]) & uint64(len(ws.slots)-1)
}

// len is the number of waiters.
func (ws *waiters) len() int { return ws.n }

// at is waiter i, valid until the next add.
func (ws *waiters) at(i uint32) *waiter { return &ws.slab[i] }

// find is the index slot of k's waiter, or -1.
func (ws *waiters) find(k namespace.Key) int {
	if ws.n == 0 {
		return -1
	}
	mask := uint64(len(ws.slots) - 1)
	for i := ws.home(&k); ws.slots[i] != 0; i = (i + 1) & mask {
		if ws.slab[ws.slots[i]].key == k {
			return int(i)
		}
	}
	return -1
}

// get is the index of k's waiter.
func (ws *waiters) get(k namespace.Key) (uint32, bool) {
	if s := ws.find(k); s >= 0 {
		return ws.slots[s], true
	}
	return 0, false
}

// add makes a waiter for k, which has none, with no children counted, and
// returns its index.
func (ws *waiters) add(k namespace.Key) uint32 {
	var i uint32
	if f := len(ws.free); f > 0 {
		i = ws.free[f-1]
		ws.free = ws.free[:f-1]
	} else {
		if len(ws.slab) > math.MaxUint32 {
			panic("store: more than 2^32 waiting parents")
		}
		i = uint32(len(ws.slab))
		ws.slab = append(ws.slab, waiter{})
	}
	ws.slab[i] = waiter{key: k}
	if (ws.n+1)*4 > len(ws.slots)*3 {
		ws.resize(max(2*len(ws.slots), minTableSlots))
	}
	ws.place(i)
	ws.n++
	return i
}

func (ws *waiters) place(i uint32) {
	mask := uint64(len(ws.slots) - 1)
	s := ws.home(&ws.slab[i].key)
	for ws.slots[s] != 0 {
		s = (s + 1) & mask
	}
	ws.slots[s] = i
}

// drop forgets waiter i.
func (ws *waiters) drop(i uint32) {
	hole := ws.find(ws.slab[i].key)
	if hole < 0 || ws.slots[hole] != i {
		panic(fmt.Sprintf("store: dropping waiter %d, which is not indexed", i))
	}
	// Backward shift: move each later waiter of the run into the hole when
	// its home slot does not lie cyclically within (hole, its slot].
	mask := uint64(len(ws.slots) - 1)
	h := uint64(hole)
	for j := (h + 1) & mask; ws.slots[j] != 0; j = (j + 1) & mask {
		if (j-ws.home(&ws.slab[ws.slots[j]].key))&mask >= (j-h)&mask {
			ws.slots[h] = ws.slots[j]
			h = j
		}
	}
	ws.slots[h] = 0
	ws.n--
	ws.slab[i] = waiter{}
	ws.free = append(ws.free, i)
	if len(ws.slots) > minTableSlots && ws.n*8 < len(ws.slots) {
		ws.resize(len(ws.slots) / 2)
	}
}

// resize rehashes the index into size slots.
func (ws *waiters) resize(size int) {
	old := ws.slots
	ws.slots = make([]uint32, size)
	for _, i := range old {
		if i != 0 {
			ws.place(i)
		}
	}
}

// live reports whether i is a waiter's index: its key finds it.
func (ws *waiters) live(i uint32) bool {
	if i == 0 || int(i) >= len(ws.slab) {
		return false
	}
	j, ok := ws.get(ws.slab[i].key)
	return ok && j == i
}

// all yields each waiter's key and index; the table must not change
// meanwhile.
func (ws *waiters) all() iter.Seq2[namespace.Key, uint32] {
	return func(yield func(namespace.Key, uint32) bool) {
		for _, i := range ws.slots {
			if i != 0 && !yield(ws.slab[i].key, i) {
				return
			}
		}
	}
}

// check reports the ways in which the table is inconsistent: a waiter its
// key does not find, an index in the slab twice, a free index in use or
// free twice, a count off.
func (ws *waiters) check() error {
	var errs []error
	used := make(map[uint32]bool, ws.n)
	for s, i := range ws.slots {
		switch {
		case i == 0:
			continue
		case int(i) >= len(ws.slab) || used[i]:
			errs = append(errs, fmt.Errorf("index slot %d holds waiter %d (of %d), out of range or twice", s, i, len(ws.slab)))
			continue
		case ws.find(ws.slab[i].key) != s:
			errs = append(errs, fmt.Errorf("waiter %d of %s in slot %d is not found by its key", i, ws.slab[i].key, s))
		}
		used[i] = true
	}
	if len(used) != ws.n {
		errs = append(errs, fmt.Errorf("%d waiters, counted %d", len(used), ws.n))
	}
	for _, i := range ws.free {
		if i == 0 || int(i) >= len(ws.slab) || used[i] {
			errs = append(errs, fmt.Errorf("free waiter %d (of %d) is in use, twice free or out of range", i, len(ws.slab)))
		}
		used[i] = true
	}
	if len(ws.slab) == 0 || len(used) != len(ws.slab)-1 {
		errs = append(errs, fmt.Errorf("%d waiters in use or free, of %d indexes", len(used), len(ws.slab)-1))
	}
	return errors.Join(errs...)
}

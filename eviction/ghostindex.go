package eviction

import (
	"hash/maphash"
	"math/bits"
)

// ghostIndex finds a live ghost's ring slot by its key: an open-addressing
// table (linear probing, deletion by backward shift, no tombstones) of
// ring positions plus one, 0 marking an empty slot; the keys stay in the
// ring. For a ring of n ghosts it keeps 4n/3 slots (a load factor of at
// most 3/4; a home slot is the hash scaled to the table, not masked, so
// the size need not be a power of two), 4 bytes each: 5.3 bytes a ghost,
// where a map[uint64]int32 sized for n took about 37 (and the power of two
// above 4n/3, 8.4 bytes a page of the tier at 1M pages).
//
// The hash is seeded per index (hash/maphash): page keys come from
// clients, who could otherwise pick keys whose probe runs are long. The
// seed changes nothing the policy decides: the index is never iterated.
type ghostIndex struct {
	seed  maphash.Seed
	slots []int32
	n     int
}

func newGhostIndex(n int) ghostIndex {
	return ghostIndex{seed: maphash.MakeSeed(), slots: make([]int32, n+n/3+1)}
}

func (x *ghostIndex) home(key uint64) int {
	hi, _ := bits.Mul64(maphash.Comparable(x.seed, key), uint64(len(x.slots)))
	return int(hi)
}

// next is the slot after i, cyclically.
func (x *ghostIndex) next(i int) int {
	if i++; i == len(x.slots) {
		return 0
	}
	return i
}

// dist is how many slots lie from a forward to b, cyclically.
func (x *ghostIndex) dist(a, b int) int {
	if d := b - a; d >= 0 {
		return d
	}
	return b - a + len(x.slots)
}

// find is the index slot of key's ghost in ring, or -1.
func (x *ghostIndex) find(key uint64, ring []ghost) int {
	for i := x.home(key); x.slots[i] != 0; i = x.next(i) {
		if ring[x.slots[i]-1].key == key {
			return i
		}
	}
	return -1
}

// get is the ring position of key's ghost.
func (x *ghostIndex) get(key uint64, ring []ghost) (int32, bool) {
	if i := x.find(key, ring); i >= 0 {
		return x.slots[i] - 1, true
	}
	return 0, false
}

// put indexes the ghost at ring[pos], whose key is not indexed yet.
func (x *ghostIndex) put(pos int32, ring []ghost) {
	i := x.home(ring[pos].key)
	for x.slots[i] != 0 {
		i = x.next(i)
	}
	x.slots[i] = pos + 1
	x.n++
}

// del forgets key's ghost, which ring still holds.
func (x *ghostIndex) del(key uint64, ring []ghost) {
	hole := x.find(key, ring)
	if hole < 0 {
		return
	}
	// Move each later entry of the run into the hole when its home does
	// not lie cyclically within (hole, its slot].
	for j := x.next(hole); x.slots[j] != 0; j = x.next(j) {
		if x.dist(x.home(ring[x.slots[j]-1].key), j) >= x.dist(hole, j) {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = 0
	x.n--
}

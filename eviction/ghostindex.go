package eviction

import (
	"hash/maphash"
	"math/bits"
)

// ghostIndex finds a live ghost's ring slot by its key: an open-addressing
// table (linear probing, deletion by backward shift, no tombstones) of
// ring positions plus one, 0 marking an empty slot; the keys stay in the
// ring. For a ring of n ghosts it keeps the power of two of slots at
// least 4n/3 (a load factor of at most 3/4), 4 bytes each: 5.3 to 10.7
// bytes a ghost, where a map[uint64]int32 sized for n took about 37 (8
// bytes a page of the tier at 1M pages, against 37).
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
	size := 1 << bits.Len(uint(n+n/3))
	return ghostIndex{seed: maphash.MakeSeed(), slots: make([]int32, size)}
}

func (x *ghostIndex) home(key uint64) int {
	return int(maphash.Comparable(x.seed, key)) & (len(x.slots) - 1)
}

// find is the index slot of key's ghost in ring, or -1.
func (x *ghostIndex) find(key uint64, ring []ghost) int {
	mask := len(x.slots) - 1
	for i := x.home(key); x.slots[i] != 0; i = (i + 1) & mask {
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
	mask := len(x.slots) - 1
	i := x.home(ring[pos].key)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
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
	mask := len(x.slots) - 1
	for j := (hole + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		if (j-x.home(ring[x.slots[j]-1].key))&mask >= (j-hole)&mask {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = 0
	x.n--
}

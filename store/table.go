package store

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"iter"

	"github.com/stratakv/strata/namespace"
)

// table is a shard's index: an open-addressing hash table (linear probing,
// deletion by backward shift, no tombstones) from a page key to its entry.
// It replaces a map[namespace.Key]*entry, which cost about 100 bytes a page
// at 1M pages (a 40-byte slot per key and pointer, at a load factor of 7/8
// down to 7/16 after each doubling); a table slot is 9 bytes, a pointer
// and a tag byte, at a load factor between 3/8 and 3/4: 12 to 24 bytes a
// page. The key lives in the entry, so the table keeps none.
//
// A slot's tag is a byte of its key's hash with the top bit set (0 marks
// an empty slot), so that a probe dereferences an entry only when its tag
// matches: one time in 128 for a slot of another key.
//
// The hash is seeded per table (hash/maphash), so that keys chosen to
// collide cannot make the probe sequences long: page keys come from
// clients, and a tenant could otherwise pick them.
//
// Not safe for concurrent use: shard.mu guards it.
type table struct {
	seed  maphash.Seed
	slots []*entry // len a power of two, or 0
	tags  []uint8  // by slot: 0 empty, else tagOf the key's hash
	n     int
}

// minTableSlots is the size of a table's first allocation.
const minTableSlots = 16

func newTable() table { return table{seed: maphash.MakeSeed()} }

func (t *table) hash(k *namespace.Key) uint64 { return maphash.Bytes(t.seed, k[:]) }

func tagOf(h uint64) uint8 { return uint8(h>>56) | 0x80 }

// len is the number of entries.
func (t *table) len() int { return t.n }

// get is k's entry, or nil.
func (t *table) get(k namespace.Key) *entry {
	if t.n == 0 {
		return nil
	}
	h := t.hash(&k)
	tag, mask := tagOf(h), uint64(len(t.slots)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return nil
		case tag:
			if e := t.slots[i]; sameKey(&e.key, &k) {
				return e
			}
		}
	}
}

// getBatch sets found[i] to the entry of keys[i], or nil, for each i in
// order. It probes every key's tags first and compares the keys after:
// the compare is a batch's first touch of each entry, a cache miss at a
// lookup's sizes, and get's compare after each probe makes the CPU wait
// for each miss in turn, where a loop of compares alone leaves the loads
// independent, for the CPU to overlap. A key whose first tag match is
// another key's entry is probed again, in full (get).
func (t *table) getBatch(keys []namespace.Key, order []int32, found []*entry) {
	if t.n == 0 {
		for _, i := range order {
			found[i] = nil
		}
		return
	}
	for _, i := range order {
		found[i] = t.first(t.hash(&keys[i]))
	}
	for _, i := range order {
		if e := found[i]; e != nil && !sameKey(&e.key, &keys[i]) {
			found[i] = t.get(keys[i])
		}
	}
}

// first is the entry in the first slot on hash h's probe path whose tag
// is h's, without dereferencing it, or nil. The table must not be empty.
func (t *table) first(h uint64) *entry {
	tag, mask := tagOf(h), uint64(len(t.slots)-1)
	for j := h & mask; t.tags[j] != 0; j = (j + 1) & mask {
		if t.tags[j] == tag {
			return t.slots[j]
		}
	}
	return nil
}

// sameKey is a == b, compared as four words inline: Go compares a
// [32]byte through a call (runtime.memequal), once for every key a
// lookup finds.
func sameKey(a, b *namespace.Key) bool {
	return binary.LittleEndian.Uint64(a[0:]) == binary.LittleEndian.Uint64(b[0:]) &&
		binary.LittleEndian.Uint64(a[8:]) == binary.LittleEndian.Uint64(b[8:]) &&
		binary.LittleEndian.Uint64(a[16:]) == binary.LittleEndian.Uint64(b[16:]) &&
		binary.LittleEndian.Uint64(a[24:]) == binary.LittleEndian.Uint64(b[24:])
}

// insert adds e under e.key, which must not be in the table.
func (t *table) insert(e *entry) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(2*len(t.slots), minTableSlots))
	}
	t.place(e, t.hash(&e.key))
	t.n++
}

func (t *table) place(e *entry, h uint64) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.tags[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i], t.tags[i] = e, tagOf(h)
}

// delete removes k's entry, if any, and reports whether there was one.
func (t *table) delete(k namespace.Key) bool {
	if t.n == 0 {
		return false
	}
	h := t.hash(&k)
	tag, mask := tagOf(h), uint64(len(t.slots)-1)
	i := h & mask
	for ; ; i = (i + 1) & mask {
		if t.tags[i] == 0 {
			return false
		}
		if t.tags[i] == tag && sameKey(&t.slots[i].key, &k) {
			break
		}
	}
	// Backward shift: move each later entry of the cluster into the hole
	// when its home slot does not lie cyclically within (hole, its slot].
	hole := i
	for j := (i + 1) & mask; t.tags[j] != 0; j = (j + 1) & mask {
		home := t.hash(&t.slots[j].key) & mask
		if (j-home)&mask >= (j-hole)&mask {
			t.slots[hole], t.tags[hole] = t.slots[j], t.tags[j]
			hole = j
		}
	}
	t.slots[hole], t.tags[hole] = nil, 0
	t.n--
	if len(t.slots) > minTableSlots && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
	return true
}

// resize rehashes the entries into size slots.
func (t *table) resize(size int) {
	old := t.slots
	t.slots, t.tags = make([]*entry, size), make([]uint8, size)
	for _, e := range old {
		if e != nil {
			t.place(e, t.hash(&e.key))
		}
	}
}

// all yields every entry; the table must not change meanwhile.
func (t *table) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, e := range t.slots {
			if e != nil && !yield(e) {
				return
			}
		}
	}
}

// check reports the first way in which the table is inconsistent: an
// entry its key does not find, a tag that is not its key's, a count off.
func (t *table) check() error {
	n := 0
	for i, e := range t.slots {
		switch {
		case e == nil && t.tags[i] != 0:
			return fmt.Errorf("empty slot %d has tag %#x", i, t.tags[i])
		case e == nil:
			continue
		case t.tags[i] != tagOf(t.hash(&e.key)):
			return fmt.Errorf("slot %d of %s has tag %#x", i, e.key, t.tags[i])
		case t.get(e.key) != e:
			return fmt.Errorf("page %s in slot %d is not found by its key", e.key, i)
		}
		n++
	}
	if n != t.n {
		return fmt.Errorf("%d entries, counted %d", n, t.n)
	}
	return nil
}

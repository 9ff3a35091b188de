package eviction

import "math/bits"

// sketch is a count-min sketch of 4-bit counters (TinyLFU's frequency
// history): how often each key was asked for recently, resident or not. It
// lets a page that was evicted and is put again start with the reuse count
// it had earned, instead of 1. Every reset increments it halves all
// counters, so the history fades with a half-life of about reset lookups.
//
// Four rows of width 4-bit counters packed 16 to a word; an update
// increments only the row counters equal to the current minimum
// (conservative update), which keeps overestimates small. A key's four
// counters lie in one 64-byte block (two words per row), so that an update
// costs one cache miss rather than four: the lookup path records every key
// it is asked about.
type sketch struct {
	words  []uint64 // rows × width/16, in blocks of 8
	blocks uint64   // len(words)/8, a power of two
	adds   int
	reset  int
	// touched keeps addAll's first reads (see there) from being optimised
	// away.
	touched uint64
}

const sketchRows = 4

// newSketch sizes the sketch for about history distinct recent keys.
func newSketch(history int) *sketch {
	width := uint64(1) << bits.Len64(uint64(max(history, 64)-1))
	words := sketchRows * width / 16
	return &sketch{words: make([]uint64, words), blocks: words / 8, reset: 4 * int(width)}
}

// bytes is the sketch's memory.
func (s *sketch) bytes() int { return 8 * len(s.words) }

func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

// slots returns the word index and shift of key's counter in each row:
// one block chosen by the hash, in it row r's two words, one of their 32
// counters.
func (s *sketch) slots(key uint64) (idx [sketchRows]int, sh [sketchRows]uint) {
	h := mix64(key)
	base := int(h&(s.blocks-1)) * 8
	h2 := mix64(h ^ 0x9e3779b97f4a7c15)
	for r := range sketchRows {
		c := h2 >> (5 * r) // 5 bits per row: which word, which counter
		idx[r] = base + 2*r + int(c>>4&1)
		sh[r] = uint(c&15) * 4
	}
	return idx, sh
}

// block is the 64-byte block that holds the counters of a key whose
// mix64 is h.
func (s *sketch) block(h uint64) *[8]uint64 {
	base := int(h&(s.blocks-1)) * 8
	return (*[8]uint64)(s.words[base : base+8])
}

// estimate is key's count, at most 15.
func (s *sketch) estimate(key uint64) uint32 {
	idx, sh := s.slots(key)
	m := uint64(15)
	for r := range sketchRows {
		m = min(m, s.words[idx[r]]>>sh[r]&15)
	}
	return uint32(m)
}

// add counts one request for key.
func (s *sketch) add(key uint64) {
	h := mix64(key)
	s.addHashed(s.block(h), h)
}

// addHashed is add for a key whose mix64 is h and whose block is blk
// (slots' arithmetic on the block itself, so that indexing it needs no
// bounds checks). The arithmetic stays in the loop that takes the minimum:
// a helper shared with slots, returning the words and shifts, made
// store's BenchmarkLookup1000 about 15% slower (six alternating pairs).
func (s *sketch) addHashed(blk *[8]uint64, h uint64) {
	h2 := mix64(h ^ 0x9e3779b97f4a7c15)
	var w [sketchRows]uint8 // word in the block, row by row
	var sh [sketchRows]uint
	m := uint64(15)
	for r := range sketchRows {
		c := h2 >> (5 * r)
		w[r] = uint8(2*r) + uint8(c>>4&1)
		sh[r] = uint(c&15) * 4
		m = min(m, blk[w[r]&7]>>sh[r]&15)
	}
	if m < 15 {
		// Branch-free: which counters equal the minimum is a coin toss
		// the CPU would mispredict.
		for r := range sketchRows {
			i := w[r] & 7
			v := blk[i]
			var inc uint64
			if v>>sh[r]&15 == m {
				inc = 1
			}
			blk[i] = v + inc<<sh[r]
		}
	}
	if s.adds++; s.adds >= s.reset {
		s.halve()
	}
}

// addRun is how many keys addAll reads ahead of adding them.
const addRun = 16

// addAll counts one request for each of keys, exactly as add would one
// after another. A sketch sized for a real tier is larger than the cache,
// so each add waits for a miss on its key's block; addAll first reads the
// blocks of a run of keys, whose misses then overlap instead of following
// one another, and adds the run's keys in order once they are cached.
func (s *sketch) addAll(keys []uint64) {
	var hs [addRun]uint64
	var blks [addRun]*[8]uint64
	for len(keys) > 0 {
		run := keys[:min(len(keys), addRun)]
		t := s.touched
		for j, k := range run {
			hs[j] = mix64(k)
			blks[j] = s.block(hs[j])
			t ^= blks[j][0]
		}
		s.touched = t
		for j := range run {
			s.addHashed(blks[j], hs[j])
		}
		keys = keys[len(run):]
	}
}

// halve ages the history: every counter is divided by two.
func (s *sketch) halve() {
	for i, w := range s.words {
		s.words[i] = (w >> 1) & 0x7777777777777777
	}
	s.adds /= 2
}

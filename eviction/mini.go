package eviction

import (
	"fmt"
	"math"
	"unsafe"
)

// Choosing the half-life and the admission rule by miniature simulation
// (issue 44; Waldspurger et al., "Cache Modeling and Optimization using
// Miniature Simulations", USENIX ATC 2017).
//
// No single setting serves every workload and size: a short half-life
// (near LRU) wins where a page's chance of reuse falls with its uses, a
// long one (near LFU) where scans would flush a hot set. An adaptive
// KindCost queue therefore replays a spatially hashed sample of its keys
// (a key is in it iff its hash falls below a threshold: a fixed rate, a
// power of two, so that the sample holds about sampleTarget pages of the
// tier's capacity) through one shadow queue per Candidate, each a Plain
// KindCost Queue of the same code with the candidate's fixed setting and
// the sampled capacity. Every put of a sampled key (Insert, or Admit's
// refusal) and every hit of one is a request to each shadow: a hit there
// saves the page's recompute cost, a miss inserts it (through the
// shadow's own Admit) and evicts to the sampled capacity. Every epoch
// (a sixteenth of the sampled capacity in sampled requests, from the
// first eviction of a shadow: until then every shadow saves the same) the
// savings, decaying by epochDecay each epoch, are compared, and the live
// queue takes the candidate that saved most if its lead over the current
// one is both more than hysteresis of the cost asked for and more than
// confidence standard deviations of the difference (the squared
// differences per request, summed alike: spread), so that the choice
// does not flap on noise.
//
// A switch restates the live queue's priorities (Queue.setHalfLife): a
// priority holds the half-lives elapsed at the page's last use, so
// without it a switch from a short half-life to a long one left the pages
// used under the short one ranked as if they had been idle for many long
// half-lives, and the reverse as if barely idle; on gen:scan at 25% the
// queue chose 8 capacities for the last three quarters of the replay and
// still saved 3.5 points less than that setting fixed. Only the time since
// a page's last use is restated, so a switch still costs what the old
// setting's decay between earlier uses lost (or kept too long).
//
// A cold queue holds the longest half-life until its first eviction or
// refusal: until then its setting orders nothing, and a long half-life
// keeps every reuse count that a later choice may want; at that point it
// takes startCandidate, restated. (Shadows scaled to the square of the
// live queue's fill while it fills, so as to choose before it is full,
// were measured too: they took settings that fit a smaller tier, and with
// switches restated fell 2.4 points short of the best fixed half-life on
// the synthetic trace at 25%.)
//
// Invariants:
//   - LRU (Candidate{}, half-life lruHalfLife: every page operation ages
//     a page 2^64-fold, more than any count or cost outweighs) is always
//     a candidate, so the live queue is at most the sampling error below
//     leaf-first LRU.
//   - The shadows run from the first put, cold like the live queue;
//     before its first eviction the queue holds the longest half-life,
//     then startCandidate until the first epoch that takes another.
//   - The live queue's priorities stay comparable across a switch: they
//     are stored in half-lives elapsed (Queue.clk), and a switch restates
//     each as if the new half-life had held since the page's last use
//     (Queue.tick counts every page operation, so q.tick − s.tick is the
//     operations since then).
//   - A key is sampled or not for the queue's whole life (its hash alone
//     decides), so a shadow sees every request for a sampled key; the
//     sample's entries (keys) live while the live queue or a shadow
//     holds the key, so a hit can be replayed in a shadow that lost it.
//
// The shadows see a page's own requests, not prefix lookups: a shadow hit
// past a page its shadow lost counts, which the live queue's leaf-first
// order would not allow. The choice ranks candidates; it does not predict
// the live queue's figure.

// Candidate is one setting an adaptive KindCost queue may take.
type Candidate struct {
	// HalfLife is the reuse counts' half-life in tier capacities; 0 is
	// LRU (lruHalfLife page operations).
	HalfLife float64
	// Admit: Admit may refuse a first-timer that ends its put when pages
	// like it come back less often than evicted pages have (the adaptive
	// admission rule). False admits every page the cutoff lets through.
	Admit bool
}

// String names c as strata-sim prints it: "lru", "hl=2", "hl=2+admit".
func (c Candidate) String() string {
	s := "lru"
	if c.HalfLife > 0 {
		s = fmt.Sprintf("hl=%g", c.HalfLife)
	}
	if c.Admit {
		s += "+admit"
	}
	return s
}

// opsOf is c's half-life in page operations for a tier of pages pages.
func (c Candidate) opsOf(pages int) float64 {
	if c.HalfLife == 0 {
		return lruHalfLife
	}
	return max(c.HalfLife*float64(pages), 1)
}

// lruHalfLife is the LRU candidate's half-life in page operations: each
// operation ages every page by 64 half-lives, a factor no reuse count or
// cost ratio reaches, so pages leave in order of last use (the best
// resident descendant's, leaf first).
const lruHalfLife = 1.0 / 64

// Candidates is what an adaptive queue chooses among: LRU, with and
// without the admission rule, and half-lives from short to long with it.
// The half-lives are the ones strata-sim --half-lives found within 0.15
// points of the best fixed one on every workload and size measured.
func Candidates() []Candidate {
	return []Candidate{{}, {Admit: true}, {HalfLife: 0.25, Admit: true}, {HalfLife: 2, Admit: true}, {HalfLife: 8, Admit: true}}
}

// startCandidate is the index in Candidates of the setting a queue takes
// at its first eviction, until an epoch takes another: a half-life of
// 0.25 capacities with the admission rule. The shadows tell the
// candidates apart only once they evict, so whatever the queue holds
// then it keeps for some epochs. Measured with strata-sim (the synthetic
// trace, gen:recency and gen:scan at 5, 10, 25 and 50%, one placement,
// with switches restated): starting at 8 capacities saved 8.6 points less
// than 0.25 fixed on gen:recency at 25% (and fell 5.4 below LRU), at 2
// capacities 9.3, while 0.25 costs at most a point where a long
// half-life wins (gen:scan at 25%, 0.58 short of 8 capacities fixed).
const startCandidate = 2

// sampleTarget is the sampled capacity in pages the sampling rate aims
// at: a tier of up to that many pages samples every key.
const sampleTarget = 1024

// hysteresis is how much more than the current candidate another must
// have saved over the last epochs to be taken, as a share of the cost
// the sampled requests asked for (0.3 points of recompute saved).
const hysteresis = 0.003

// epochDecay is what the savings of past epochs count for at the end of
// each: about two hundred epochs, twelve capacities of sampled requests,
// decide. Measured with strata-sim (one placement; the sum over the
// twelve cells of the synthetic trace, gen:recency and gen:scan of the
// points short of the best fixed half-life, and the worst cell), starting
// at 0.25 from the first put: epochs of a quarter capacity decaying by
// 0.95, -5.1 and -0.99; by 0.98, -3.7 and -0.94; holding the longest
// half-life until the first eviction, -4.1 and -0.85; and then epochs of
// a sixteenth decaying by 0.995 (the same memory in requests, a choice
// four times as often), -2.8 and -0.88 (-3.3 and -0.97 once switches
// through LRU keep the best descendant's priority as it was:
// Queue.setHalfLife). (Before, without switches
// restated: 1.7 points short on the synthetic trace at 5% with 0.75; 1.1
// with 0.9; 0.2 more with 0.95.)
const epochDecay = 0.995

// maxCandidates bounds len(Candidates()).
const maxCandidates = 8

// sample is one sampled key: its page as last put, its recompute cost,
// and its handle in each shadow (0: the shadow does not hold it).
type sample struct {
	page Page
	cost float64 // the page's, computed once per put (Queue.costs)
	h    [maxCandidates]Handle
	live bool // the live queue tracks the page
}

// mini is an adaptive queue's miniature simulations.
type mini struct {
	q       *Queue // the live queue, whose setting it chooses
	pages   int    // the live tier's capacity in pages
	shift   uint   // a key is sampled iff mix(key) >> (64 - shift) == 0
	cands   []Candidate
	shadows []*Queue
	capac   int64            // the shadows' capacity in bytes
	keys    map[uint64]int32 // sampled key -> its entry in slab
	slab    []sample
	free    []int32   // free entries of slab
	saved   []float64 // recompute cost saved per shadow, decaying every epoch
	asked   float64   // recompute cost of the sampled requests, decaying alike
	cur     int       // the candidate the live queue holds
	epoch   int       // sampled requests per epoch
	n       int       // sampled requests this epoch
	epochs  int
	full    bool // a shadow has evicted: the epochs have begun
	filled  bool // the live queue has evicted or refused a page
	// spread[i][j] (i < j) is the sum of the squared differences between
	// what shadows i and j saved per request, decaying by epochDecay²: the
	// variance of saved[i] − saved[j] under the null that they are alike.
	spread [maxCandidates][maxCandidates]float64
}

// newMini is the miniature simulations of live, a queue of capacity pages
// and capBytes bytes.
func newMini(live *Queue, pages int, capBytes int64, prof ComputeProfile) *mini {
	shift := uint(0)
	for pages>>shift > sampleTarget && shift < 32 {
		shift++
	}
	m := &mini{q: live, pages: pages, shift: shift, cands: Candidates(), keys: map[uint64]int32{}}
	sp := max(pages>>shift, 1)
	m.epoch = max(sp/16, 16)
	m.capac = capBytes >> shift
	for _, c := range m.cands {
		// The same code as the live queue, Plain (a sample rarely holds
		// a page's parent), without a history of its own (the live
		// queue's counts come with each request, Page.Freq).
		sh, err := New(Config{Kind: KindCost, Profile: prof, Plain: true, Capacity: sp, History: -1,
			CapacityBytes: m.capac, HalfLife: 1})
		if err != nil {
			panic(err) // the live queue's own, validated profile
		}
		sh.halfLife = c.opsOf(sp)
		sh.noAdmit = !c.Admit
		m.shadows = append(m.shadows, sh)
	}
	m.saved = make([]float64, len(m.cands))
	m.set(len(m.cands) - 1)
	return m
}

// fill is the live queue's first eviction or refusal: until then it
// holds the longest half-life, which loses no reuse count to decay before
// an eviction needs one, and from then on startCandidate.
func (m *mini) fill() {
	m.filled = true
	m.set(startCandidate)
}

// setCapacity scales the shadows to a live capacity of capBytes.
func (m *mini) setCapacity(capBytes int64) {
	m.capac = capBytes >> m.shift
	for _, sh := range m.shadows {
		sh.capacity = m.capac
	}
}

// set gives the live queue candidate i.
func (m *mini) set(i int) {
	m.cur = i
	m.q.setHalfLife(m.cands[i].opsOf(m.pages))
	m.q.noAdmit = !m.cands[i].Admit
}

// sampled reports whether key is in the sample: its hash (mix64, salted)
// has shift leading zeros.
func (m *mini) sampled(key uint64) bool {
	if m.shift == 0 {
		return true
	}
	return mix64(key^sampleSalt)>>(64-m.shift) == 0
}

// sampleSalt decorrelates the sample from the frequency history, which
// hashes keys with mix64 too: sampled keys would share its blocks.
const sampleSalt = 0x5851f42d4c957f2d

// put is a put of sampled page p (Freq: the count the live queue gave
// it); live: the live queue now tracks it (Insert), else it refused it.
func (m *mini) put(p Page, live bool) {
	i, ok := m.keys[p.Key]
	if !ok {
		i = m.alloc(p.Key)
	}
	e := &m.slab[i]
	e.page = p
	e.cost, _ = m.q.costs(&p)
	e.live = e.live || live
	m.request(i)
}

// alloc is a new, empty entry for key.
func (m *mini) alloc(key uint64) int32 {
	var i int32
	if n := len(m.free); n > 0 {
		i, m.free = m.free[n-1], m.free[:n-1]
	} else {
		i = int32(len(m.slab))
		m.slab = append(m.slab, sample{})
	}
	m.keys[key] = i
	return i
}

// hit is a hit of sampled, tracked key in the live queue, whose count is
// now freq.
func (m *mini) hit(key uint64, freq uint32) {
	i, ok := m.keys[key]
	if !ok {
		return
	}
	m.slab[i].page.Freq = freq
	m.request(i)
}

// gone is the live queue's eviction or removal of sampled key.
func (m *mini) gone(key uint64) {
	if i, ok := m.keys[key]; ok {
		m.slab[i].live = false
		m.tidy(i)
	}
}

// tidy forgets entry i's key when nothing holds it.
func (m *mini) tidy(i int32) {
	e := &m.slab[i]
	if e.live || e.h != ([maxCandidates]Handle{}) {
		return
	}
	delete(m.keys, e.page.Key)
	*e = sample{}
	m.free = append(m.free, i)
}

// request replays one request for key in every shadow: a hit saves the
// page's cost, a miss puts it.
func (m *mini) request(ei int32) {
	e := &m.slab[ei]
	p, cost := &e.page, e.cost
	if !m.full {
		cost = 0 // no shadow has evicted: all would save the same
	}
	m.asked += cost
	var hit [maxCandidates]bool
	for i, sh := range m.shadows {
		if e.h[i] != 0 {
			sh.Hit(e.h[i])
			m.saved[i] += cost
			hit[i] = true
			continue
		}
		if !sh.Admit(*p) {
			continue
		}
		e.h[i] = sh.Insert(*p)
		for sh.bytes > m.capac {
			v, ok := sh.Victim()
			if !ok {
				break
			}
			vk := sh.ids[v].key
			sh.Evict(v)
			m.full = true
			if vi, ok := m.keys[vk]; ok {
				m.slab[vi].h[i] = 0
				if vi != ei {
					m.tidy(vi)
				}
			}
		}
	}
	m.tidy(ei)
	if !m.full {
		return
	}
	m.spreadAdd(&hit, cost)
	if m.n++; m.n >= m.epoch {
		m.choose()
	}
}

// spreadAdd adds one request's differences between the shadows' savings
// (cost where hit) to spread.
func (m *mini) spreadAdd(hit *[maxCandidates]bool, cost float64) {
	c2 := cost * cost
	for i := range m.shadows {
		for j := i + 1; j < len(m.shadows); j++ {
			if hit[i] != hit[j] {
				m.spread[i][j] += c2
			}
		}
	}
}

// confidence is how many standard deviations of the difference between
// two shadows' savings (spread) the candidate's lead must be to be taken.
// Measured as epochDecay (its last setting): 1.5, -2.9 and -0.92; 2,
// -2.8 and -0.88; 3, -4.2 and -1.01.
const confidence = 2

// choose ends an epoch: the live queue takes the candidate that saved
// most, past hysteresis and confidence; the savings decay.
func (m *mini) choose() {
	m.n = 0
	m.epochs++
	best := m.cur
	for i, s := range m.saved {
		if s > m.saved[best] {
			best = i
		}
	}
	if d := m.saved[best] - m.saved[m.cur]; best != m.cur && d > hysteresis*m.asked &&
		d*d > confidence*confidence*m.spread[min(best, m.cur)][max(best, m.cur)] {
		m.set(best)
	}
	for i := range m.saved {
		m.saved[i] *= epochDecay
		for j := i + 1; j < len(m.saved); j++ {
			m.spread[i][j] *= epochDecay * epochDecay
		}
	}
	m.asked *= epochDecay
}

// bytes is the memory of the sample: the shadows' state and heaps, their
// ghost lists and the sampled keys' entries.
func (m *mini) bytes() int {
	n := 0
	for _, sh := range m.shadows {
		n += cap(sh.pages)*int(unsafe.Sizeof(state{})) + cap(sh.heap)*int(unsafe.Sizeof(entry{})) +
			cap(sh.ids)*IdentBytes + cap(sh.free)*4 + sh.GhostBytes()
	}
	// A map entry (key and index, and a control byte, at a load of 7/8)
	// and a slab entry.
	per := int(unsafe.Sizeof(uint64(0))+unsafe.Sizeof(int32(0))) + 1
	return n + len(m.keys)*per*8/7 + cap(m.slab)*int(unsafe.Sizeof(sample{})) + cap(m.free)*4
}

// rate is the sampling rate, a power of two.
func (m *mini) rate() float64 { return math.Ldexp(1, -int(m.shift)) }

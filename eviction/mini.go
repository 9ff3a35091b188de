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
// (a quarter of the sampled capacity in sampled requests, from the first
// eviction of a shadow: until then every shadow saves the same) the
// savings, decaying by epochDecay each epoch, are compared, and the live
// queue takes the candidate that saved most, if it saved more than the
// current one by hysteresis of the cost asked for (so that the choice
// does not flap on noise).
//
// Invariants:
//   - LRU (Candidate{}, half-life lruHalfLife: every page operation ages
//     a page 2^64-fold, more than any count or cost outweighs) is always
//     a candidate, so the live queue is at most the sampling error below
//     leaf-first LRU.
//   - The shadows run from the first put, cold like the live queue;
//     before the first epoch the queue holds startCandidate.
//   - The live queue's priorities stay comparable across a switch: they
//     are stored in half-lives elapsed (Queue.clk), whatever the
//     half-life was when they were set.
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

// startCandidate is the index in Candidates of the setting a cold queue
// starts with, before its first epoch: a half-life of 0.25 capacities
// with the admission rule. A switch keeps the pages' priorities, so a
// count a short half-life has decayed stays lost, while a switch from a
// long half-life leaves pages ranked by counts the new setting would have
// forgotten until they go. Measured with strata-sim (the synthetic trace,
// gen:recency and gen:scan at 5, 10, 25 and 50%, one placement): starting
// at 8 capacities fell 0.91 points below LRU on gen:recency at 50%, where
// the tier fills late and the choice comes after the damage; at 2, 0.23
// points; at 0.25 it never fell below LRU, and it is within a point of
// the best fixed half-life in as many cells as starting at LRU (9 of 12),
// which would make a cold store ignore the cost model (and fell 0.02
// points below LRU on gen:scan at 50%).
const startCandidate = 2

// sampleTarget is the sampled capacity in pages the sampling rate aims
// at: a tier of up to that many pages samples every key.
const sampleTarget = 1024

// hysteresis is how much more than the current candidate another must
// have saved over the last epochs to be taken, as a share of the cost
// the sampled requests asked for (0.3 points of recompute saved).
const hysteresis = 0.003

// epochDecay is what the savings of past epochs count for at the end of
// each: about twenty epochs, five capacities of sampled requests, decide.
// Measured with strata-sim as startCandidate: on the synthetic trace at
// 5% (one placement) the choice flapped and saved 1.7 points less than
// the best fixed half-life with 0.75; 1.1 with 0.9; 0.2 more with 0.95.
const epochDecay = 0.95

// maxCandidates bounds len(Candidates()).
const maxCandidates = 8

// sample is one sampled key: its page as last put, and its handle in each
// shadow (0: the shadow does not hold it).
type sample struct {
	page Page
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
	capac   int64 // the shadows' capacity in bytes
	keys    map[uint64]sample
	saved   []float64 // recompute cost saved per shadow, decaying every epoch
	asked   float64   // recompute cost of the sampled requests, decaying alike
	cur     int       // the candidate the live queue holds
	epoch   int       // sampled requests per epoch
	n       int       // sampled requests this epoch
	epochs  int
	full    bool // a shadow has evicted: the epochs have begun
}

// newMini is the miniature simulations of live, a queue of capacity pages
// and capBytes bytes.
func newMini(live *Queue, pages int, capBytes int64, prof ComputeProfile) *mini {
	shift := uint(0)
	for pages>>shift > sampleTarget && shift < 32 {
		shift++
	}
	m := &mini{q: live, pages: pages, shift: shift, cands: Candidates(), keys: map[uint64]sample{}}
	sp := max(pages>>shift, 1)
	m.epoch = max(sp/4, 16)
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
	m.set(startCandidate)
	return m
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
	m.q.halfLife = m.cands[i].opsOf(m.pages)
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
	e := m.keys[p.Key]
	e.page = p
	e.live = e.live || live
	m.request(p.Key, e)
}

// hit is a hit of sampled, tracked key in the live queue, whose count is
// now freq.
func (m *mini) hit(key uint64, freq uint32) {
	e, ok := m.keys[key]
	if !ok {
		return
	}
	e.page.Freq = freq
	m.request(key, e)
}

// gone is the live queue's eviction or removal of sampled key.
func (m *mini) gone(key uint64) {
	if e, ok := m.keys[key]; ok {
		e.live = false
		m.store(key, e)
	}
}

// store keeps e as key's entry, or forgets key when nothing holds it.
func (m *mini) store(key uint64, e sample) {
	if !e.live && e.h == ([maxCandidates]Handle{}) {
		delete(m.keys, key)
		return
	}
	m.keys[key] = e
}

// request replays one request for key in every shadow: a hit saves the
// page's cost, a miss puts it.
func (m *mini) request(key uint64, e sample) {
	p := &e.page
	cost, _ := m.q.costs(p)
	if !m.full {
		cost = 0 // no shadow has evicted: all would save the same
	}
	m.asked += cost
	for i, sh := range m.shadows {
		if e.h[i] != 0 {
			sh.Hit(e.h[i])
			m.saved[i] += cost
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
			if vk == key {
				e.h[i] = 0
				continue
			}
			ve := m.keys[vk]
			ve.h[i] = 0
			m.store(vk, ve)
		}
	}
	m.store(key, e)
	if !m.full {
		return
	}
	if m.n++; m.n >= m.epoch {
		m.choose()
	}
}

// choose ends an epoch: the live queue takes the candidate that saved
// most, past hysteresis; the savings halve.
func (m *mini) choose() {
	m.n = 0
	m.epochs++
	best := m.cur
	for i, s := range m.saved {
		if s > m.saved[best] {
			best = i
		}
	}
	if best != m.cur && m.saved[best]-m.saved[m.cur] > hysteresis*m.asked {
		m.set(best)
	}
	for i := range m.saved {
		m.saved[i] *= epochDecay
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
	// A map entry: key and value, and a control byte, at a load of 7/8.
	per := int(unsafe.Sizeof(uint64(0))+unsafe.Sizeof(sample{})) + 1
	return n + len(m.keys)*per*8/7
}

// rate is the sampling rate, a power of two.
func (m *mini) rate() float64 { return math.Ldexp(1, -int(m.shift)) }

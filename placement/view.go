package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// Node is one member of the cluster as placement sees it.
type Node struct {
	// ID names the node; it must be non-empty valid UTF-8 and unique within
	// a View. It is hashed, so renaming a node moves its keys.
	ID string
	// Weight is the node's share of keys, e.g. its capacity in bytes; it
	// must be finite and > 0. Only ratios matter to the distribution, but
	// every client must use the same values to get the same owners.
	Weight float64
}

// View is an immutable snapshot of the live nodes. It is safe for concurrent
// use; a membership change builds a new View.
type View struct {
	nodes   []Node   // sorted by ID
	members []member // members[i] is nodes[i], laid out for the hot loop
}

type member struct {
	seed   uint64
	weight float64
}

// NewView validates nodes and returns a View of them sorted by ID, so the
// input order does not matter. An empty (or nil) nodes gives an empty View.
func NewView(nodes []Node) (*View, error) {
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	v := &View{nodes: sorted, members: make([]member, len(sorted))}
	for i, n := range sorted {
		if n.ID == "" || !utf8.ValidString(n.ID) {
			return nil, fmt.Errorf("new view: node %q: %w", n.ID, ErrBadID)
		}
		if i > 0 && sorted[i-1].ID == n.ID {
			return nil, fmt.Errorf("new view: node %q: %w", n.ID, ErrDuplicateID)
		}
		if !(n.Weight > 0) || math.IsInf(n.Weight, 1) {
			return nil, fmt.Errorf("new view: node %q weight %v: %w", n.ID, n.Weight, ErrBadWeight)
		}
		v.members[i] = member{seed: seedOf(n.ID), weight: n.Weight}
	}
	return v, nil
}

// Len returns the number of nodes.
func (v *View) Len() int { return len(v.nodes) }

// Nodes returns a copy of the nodes, sorted by ID; the indices returned by
// Owner and Candidates index this slice.
func (v *View) Nodes() []Node { return slices.Clone(v.nodes) }

// Node returns the node at index i, as Nodes()[i] without the copy.
func (v *View) Node(i int) Node { return v.nodes[i] }

// Owner returns the index of the node that owns key, or -1 if the View is
// empty. It is Candidates with room for one.
func (v *View) Owner(key [32]byte) int {
	if len(v.members) == 0 {
		return -1
	}
	k := keyWord(&key)
	best := v.rank(k, 0)
	for i := 1; i < len(v.members); i++ {
		if r := v.rank(k, i); r.before(best) {
			best = r
		}
	}
	return best.i
}

// Candidates writes the indices of key's top min(len(dst), Len()) nodes into
// dst, best first, and returns that prefix of dst: the owner, then the spill
// candidate, then further replicas. It never allocates. It costs O(Len())
// hashes plus O(len(dst)·log len(dst)) for the ordering.
func (v *View) Candidates(key [32]byte, dst []int) []int {
	n := min(len(dst), len(v.members))
	dst = dst[:n]
	if n == 0 {
		return dst
	}
	if n == 1 {
		dst[0] = v.Owner(key)
		return dst
	}
	k := keyWord(&key)
	if n <= smallN {
		return v.candidatesSmall(k, dst)
	}
	// dst is a heap of the best n seen so far with the worst at the root, so
	// a node that does not beat the root is rejected with one comparison.
	// Ranks are recomputed rather than stored, to need no scratch memory.
	for i := range n {
		dst[i] = i
	}
	for i := n/2 - 1; i >= 0; i-- {
		v.down(k, dst, i)
	}
	worst := v.rank(k, dst[0])
	for i := n; i < len(v.members); i++ {
		if r := v.rank(k, i); r.before(worst) {
			dst[0] = i
			v.down(k, dst, 0)
			worst = v.rank(k, dst[0])
		}
	}
	// Heap sort: the worst goes to the back, then the next worst, and so on.
	for end := n - 1; end > 0; end-- {
		dst[0], dst[end] = dst[end], dst[0]
		v.down(k, dst[:end], 0)
	}
	return dst
}

// smallN is the most candidates kept in an on-stack sorted array; more use
// a heap in dst.
const smallN = 8

// candidatesSmall is Candidates for 2 <= len(dst) <= smallN: insertion into a
// sorted array, where most nodes are rejected by one comparison with the
// current last.
func (v *View) candidatesSmall(k uint64, dst []int) []int {
	var top [smallN]rank
	n, filled := len(dst), 0
	for i := range v.members {
		r := v.rank(k, i)
		if filled == n && !r.before(top[n-1]) {
			continue
		}
		j := min(filled, n-1)
		for j > 0 && r.before(top[j-1]) {
			top[j] = top[j-1]
			j--
		}
		top[j] = r
		filled = min(filled+1, n)
	}
	for j := range dst {
		dst[j] = top[j].i
	}
	return dst
}

// down sifts heap[i] down until no child ranks after its parent.
func (v *View) down(k uint64, heap []int, i int) {
	r := v.rank(k, heap[i])
	for {
		c := 2*i + 1
		if c >= len(heap) {
			return
		}
		rc := v.rank(k, heap[c])
		if c+1 < len(heap) {
			if r2 := v.rank(k, heap[c+1]); rc.before(r2) {
				c, rc = c+1, r2
			}
		}
		if !r.before(rc) {
			return
		}
		heap[i], heap[c] = heap[c], heap[i]
		i = c
	}
}

// rank is node i's position key for one page key.
type rank struct {
	score float64
	h     uint64
	i     int
}

func (v *View) rank(k uint64, i int) rank {
	m := &v.members[i]
	h := mix64(k ^ m.seed)
	return rank{score: score(m.weight, h), h: h, i: i}
}

// before reports whether a ranks ahead of b: higher score, then higher hash,
// then lower index.
func (a rank) before(b rank) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.h != b.h {
		return a.h > b.h
	}
	return a.i < b.i
}

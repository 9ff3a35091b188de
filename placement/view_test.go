package placement

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("placement.seed", 0, "seed for randomized placement tests (0: time-based)")

// testRand returns a seeded generator and logs the seed so a failure can be
// replayed with -placement.seed.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -placement.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func randKey(r *rand.Rand) [32]byte {
	var k [32]byte
	for i := 0; i < len(k); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			k[i+j] = byte(v >> (8 * j))
		}
	}
	return k
}

func mustView(t testing.TB, nodes ...Node) *View {
	t.Helper()
	v, err := NewView(nodes)
	if err != nil {
		t.Fatalf("NewView(%v): %v", nodes, err)
	}
	return v
}

// ownerID is the ID of key's owner, "" for an empty view.
func ownerID(v *View, key [32]byte) string {
	if i := v.Owner(key); i >= 0 {
		return v.Node(i).ID
	}
	return ""
}

// reference ranks every node by sorting, the obvious way.
func reference(v *View, key [32]byte) []int {
	k := keyWord(&key)
	ranks := make([]rank, v.Len())
	for i := range ranks {
		ranks[i] = v.rank(k, i)
	}
	slices.SortFunc(ranks, func(a, b rank) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	out := make([]int, len(ranks))
	for i, r := range ranks {
		out[i] = r.i
	}
	return out
}

func TestNewViewValidation(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		err   error
	}{
		{"nil", nil, nil},
		{"one", []Node{{"a", 1}}, nil},
		{"several", []Node{{"b", 1}, {"a", 2.5}, {"c", 1 << 40}}, nil},
		{"tiny weight", []Node{{"a", math.SmallestNonzeroFloat64}}, nil},
		{"max weight", []Node{{"a", math.MaxFloat64}}, nil},
		{"unicode id", []Node{{"ノード", 1}}, nil},
		{"empty id", []Node{{"a", 1}, {"", 1}}, ErrBadID},
		{"invalid utf-8 id", []Node{{"a\xff", 1}}, ErrBadID},
		{"duplicate id", []Node{{"a", 1}, {"b", 1}, {"a", 2}}, ErrDuplicateID},
		{"zero weight", []Node{{"a", 0}}, ErrBadWeight},
		{"negative zero weight", []Node{{"a", math.Copysign(0, -1)}}, ErrBadWeight},
		{"negative weight", []Node{{"a", -1}}, ErrBadWeight},
		{"NaN weight", []Node{{"a", math.NaN()}}, ErrBadWeight},
		{"+Inf weight", []Node{{"a", math.Inf(1)}}, ErrBadWeight},
		{"-Inf weight", []Node{{"a", math.Inf(-1)}}, ErrBadWeight},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewView(tt.nodes)
			if !errors.Is(err, tt.err) {
				t.Fatalf("NewView(%v) error = %v, want %v", tt.nodes, err, tt.err)
			}
			if err != nil {
				if v != nil {
					t.Errorf("NewView returned a view with error %v", err)
				}
				return
			}
			if v.Len() != len(tt.nodes) {
				t.Errorf("Len() = %d, want %d", v.Len(), len(tt.nodes))
			}
			got := v.Nodes()
			if !slices.IsSortedFunc(got, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) }) {
				t.Errorf("Nodes() = %v, not sorted by ID", got)
			}
		})
	}
}

func TestViewDoesNotAlias(t *testing.T) {
	in := []Node{{"b", 1}, {"a", 2}}
	v := mustView(t, in...)
	in[0].ID = "z"
	got := v.Nodes()
	got[0].Weight = 99
	if want := []Node{{"a", 2}, {"b", 1}}; !slices.Equal(v.Nodes(), want) {
		t.Fatalf("Nodes() = %v after mutating input and output, want %v", v.Nodes(), want)
	}
}

func TestEmptyView(t *testing.T) {
	v := mustView(t)
	var key [32]byte
	if got := v.Owner(key); got != -1 {
		t.Errorf("Owner on empty view = %d, want -1", got)
	}
	if got := v.Candidates(key, make([]int, 3)); len(got) != 0 {
		t.Errorf("Candidates on empty view = %v, want empty", got)
	}
}

func TestCandidatesLength(t *testing.T) {
	v := mustView(t, Node{"a", 1}, Node{"b", 2}, Node{"c", 3})
	var key [32]byte
	for _, n := range []int{0, 1, 2, 3, 4, 10} {
		got := v.Candidates(key, make([]int, n))
		if want := min(n, 3); len(got) != want {
			t.Errorf("Candidates with len(dst)=%d returned %d, want %d", n, len(got), want)
		}
	}
	if got := v.Candidates(key, nil); len(got) != 0 {
		t.Errorf("Candidates(nil) = %v, want empty", got)
	}
}

func TestDeterminism(t *testing.T) {
	r := testRand(t)
	nodes := []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 2}, {"node-d", 4}, {"node-e", 0.5}}
	base := mustView(t, nodes...)
	var shuffled []*View
	for range 5 {
		perm := slices.Clone(nodes)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		shuffled = append(shuffled, mustView(t, perm...))
	}
	for _, v := range shuffled {
		if !slices.Equal(v.Nodes(), base.Nodes()) {
			t.Fatalf("Nodes() = %v for a shuffled input, want %v", v.Nodes(), base.Nodes())
		}
	}
	a, b := make([]int, 5), make([]int, 5)
	for range 10_000 {
		key := randKey(r)
		want := base.Candidates(key, a)
		if again := base.Candidates(key, b); !slices.Equal(again, want) {
			t.Fatalf("key %x: Candidates changed between calls: %v then %v", key, want, again)
		}
		for _, v := range shuffled {
			if got := v.Candidates(key, b); !slices.Equal(got, want) {
				t.Fatalf("key %x: Candidates = %v for a shuffled input, want %v", key, got, want)
			}
		}
	}
}

const distKeys = 200_000

// shares counts each node's share of distKeys random keys' owners.
func shares(r *rand.Rand, v *View) []float64 {
	counts := make([]float64, v.Len())
	for range distKeys {
		counts[v.Owner(randKey(r))]++
	}
	for i := range counts {
		counts[i] /= distKeys
	}
	return counts
}

func weightShares(v *View) []float64 {
	var sum float64
	for _, n := range v.Nodes() {
		sum += n.Weight
	}
	out := make([]float64, v.Len())
	for i, n := range v.Nodes() {
		out[i] = n.Weight / sum
	}
	return out
}

func TestDistribution(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name  string
		nodes []Node
	}{
		{"equal 3", []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 1}}},
		{"equal 4", []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 1}, {"node-d", 1}}},
		{"1:1:2:4", []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 2}, {"node-d", 4}}},
		{"bytes 64G:64G:128G:256G", []Node{
			{"10.0.0.1:7420", 64 * gib}, {"10.0.0.2:7420", 64 * gib},
			{"10.0.0.3:7420", 128 * gib}, {"10.0.0.4:7420", 256 * gib},
		}},
		{"equal 10 sequential ids", func() []Node {
			var ns []Node
			for i := range 10 {
				ns = append(ns, Node{fmt.Sprintf("n%d", i), 1})
			}
			return ns
		}()},
	}
	r := testRand(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustView(t, tt.nodes...)
			got, want := shares(r, v), weightShares(v)
			for i := range got {
				t.Logf("%-14s share %.4f want %.4f", v.Node(i).ID, got[i], want[i])
				if math.Abs(got[i]-want[i]) > 0.02 {
					t.Errorf("%s owns %.4f of keys, want %.4f ± 0.02", v.Node(i).ID, got[i], want[i])
				}
			}
		})
	}
}

func TestJoinMovesKeysOnlyToNewNode(t *testing.T) {
	r := testRand(t)
	before := mustView(t, Node{"node-a", 1}, Node{"node-b", 1}, Node{"node-c", 1})
	after := mustView(t, Node{"node-a", 1}, Node{"node-b", 1}, Node{"node-c", 1}, Node{"node-d", 1})
	moved := 0
	for range distKeys {
		key := randKey(r)
		was, now := ownerID(before, key), ownerID(after, key)
		if was == now {
			continue
		}
		moved++
		if now != "node-d" {
			t.Fatalf("key %x moved from %s to %s, want only moves to the new node-d", key, was, now)
		}
	}
	frac := float64(moved) / distKeys
	t.Logf("join of a 4th equal node moved %.4f of keys (expect 0.25)", frac)
	if frac < 0.20 || frac > 0.30 {
		t.Errorf("join moved %.4f of keys, want between 0.20 and 0.30", frac)
	}
}

func TestLeaveMovesOnlyLeaversKeys(t *testing.T) {
	r := testRand(t)
	all := []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 2}, {"node-d", 4}}
	before := mustView(t, all...)
	for gone := range all {
		t.Run(all[gone].ID, func(t *testing.T) {
			rest := slices.Delete(slices.Clone(all), gone, gone+1)
			after := mustView(t, rest...)
			moved := 0
			cand := make([]int, 2)
			for range distKeys / 4 {
				key := randKey(r)
				c := before.Candidates(key, cand)
				was, second := before.Node(c[0]).ID, before.Node(c[1]).ID
				now := ownerID(after, key)
				switch {
				case was != all[gone].ID && now != was:
					t.Fatalf("key %x moved from %s to %s although %s left", key, was, now, all[gone].ID)
				case was == all[gone].ID && now != second:
					t.Fatalf("key %x of leaver %s went to %s, want its second candidate %s", key, was, now, second)
				case was == all[gone].ID:
					moved++
				}
			}
			t.Logf("leave of %s moved %.4f of keys (its weight share %.4f)",
				all[gone].ID, float64(moved)/(distKeys/4), weightShares(before)[gone])
		})
	}
}

func TestSecondCandidate(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
	}{
		{"equal 4", []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 1}, {"node-d", 1}}},
		{"1:1:2:4", []Node{{"node-a", 1}, {"node-b", 1}, {"node-c", 2}, {"node-d", 4}}},
	}
	r := testRand(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustView(t, tt.nodes...)
			n, w := v.Len(), weightShares(v)
			byOwner := make([][]float64, n) // byOwner[o][s]: keys with owner o and second s
			for o := range byOwner {
				byOwner[o] = make([]float64, n)
			}
			cand := make([]int, 2)
			for range distKeys {
				c := v.Candidates(randKey(r), cand)
				if c[0] == c[1] {
					t.Fatalf("second candidate %d is the owner", c[1])
				}
				byOwner[c[0]][c[1]]++
			}
			// Overall, second = s with probability Σ_{o≠s} w_o·w_s/(1-w_o).
			for s := range n {
				var got, want float64
				for o := range n {
					got += byOwner[o][s] / distKeys
					if o != s {
						want += w[o] * w[s] / (1 - w[o])
					}
				}
				t.Logf("%s is second for %.4f of keys, want %.4f", v.Node(s).ID, got, want)
				if math.Abs(got-want) > 0.02 {
					t.Errorf("%s is second for %.4f of keys, want %.4f ± 0.02", v.Node(s).ID, got, want)
				}
			}
			// Given the owner, the second is spread over the others by weight.
			for o := range n {
				var total float64
				for _, c := range byOwner[o] {
					total += c
				}
				for s := range n {
					if s == o {
						continue
					}
					got, want := byOwner[o][s]/total, w[s]/(1-w[o])
					if math.Abs(got-want) > 0.02 {
						t.Errorf("owner %s: second %s for %.4f of its keys, want %.4f ± 0.02",
							v.Node(o).ID, v.Node(s).ID, got, want)
					}
				}
			}
		})
	}
}

// randomNodes returns n nodes with assorted IDs and weights spanning many
// orders of magnitude.
func randomNodes(r *rand.Rand, n int) []Node {
	prefixes := []string{"node-", "10.0.0.", "ノード", "é", "n"}
	seen := map[string]bool{}
	var nodes []Node
	for len(nodes) < n {
		id := fmt.Sprintf("%s%d", prefixes[r.IntN(len(prefixes))], r.IntN(1000))
		if seen[id] {
			continue
		}
		seen[id] = true
		var w float64
		switch r.IntN(3) {
		case 0:
			w = 1
		case 1:
			w = float64(1+r.IntN(8)) * (1 << 34)
		default:
			w = math.Exp(r.Float64()*40 - 20)
		}
		nodes = append(nodes, Node{id, w})
	}
	return nodes
}

func TestRandomizedProperties(t *testing.T) {
	r := testRand(t)
	dst, dst2 := make([]int, 64), make([]int, 64)
	for iter := range 300 {
		nodes := randomNodes(r, 1+r.IntN(40))
		v := mustView(t, nodes...)
		perm := slices.Clone(nodes)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		shuffled := mustView(t, perm...)
		newcomer := randomNodes(r, 1)[0]
		if slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == newcomer.ID }) {
			newcomer.ID += "-new"
		}
		joined := mustView(t, append(slices.Clone(nodes), newcomer)...)
		gone := r.IntN(len(nodes))
		left := mustView(t, slices.Delete(slices.Clone(nodes), gone, gone+1)...)
		goneID := nodes[gone].ID

		for range 50 {
			key := randKey(r)
			ref := reference(v, key)
			k := r.IntN(v.Len() + 3)
			got := v.Candidates(key, dst[:k])
			if want := ref[:min(k, len(ref))]; !slices.Equal(got, want) {
				t.Fatalf("iter %d view %v key %x: Candidates(%d) = %v, want %v", iter, v.Nodes(), key, k, got, want)
			}
			if o := v.Owner(key); o != ref[0] {
				t.Fatalf("iter %d key %x: Owner = %d, want %d", iter, key, o, ref[0])
			}
			if got := shuffled.Candidates(key, dst2[:k]); !slices.Equal(got, v.Candidates(key, dst[:k])) {
				t.Fatalf("iter %d key %x: shuffled input changed Candidates: %v", iter, key, got)
			}
			was := v.Node(ref[0]).ID
			if now := ownerID(joined, key); now != was && now != newcomer.ID {
				t.Fatalf("iter %d key %x: %s joined but owner moved from %s to %s", iter, key, newcomer.ID, was, now)
			}
			now := ownerID(left, key)
			switch {
			case was != goneID && now != was:
				t.Fatalf("iter %d key %x: %s left but owner moved from %s to %s", iter, key, goneID, was, now)
			case was == goneID && len(ref) > 1 && now != v.Node(ref[1]).ID:
				t.Fatalf("iter %d key %x: leaver's key went to %s, want second candidate %s", iter, key, now, v.Node(ref[1]).ID)
			}
		}
	}
}

func TestNoAllocations(t *testing.T) {
	r := testRand(t)
	v := mustView(t, randomNodes(r, 1000)...)
	key := randKey(r)
	dst := make([]int, 3)
	if n := testing.AllocsPerRun(100, func() { v.Owner(key) }); n != 0 {
		t.Errorf("Owner allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(100, func() { v.Candidates(key, dst) }); n != 0 {
		t.Errorf("Candidates allocates %v times per call", n)
	}
}

// FuzzCandidates checks Candidates against a full sort for arbitrary keys
// and lengths over a fixed mixed-weight view.
func FuzzCandidates(f *testing.F) {
	f.Add(make([]byte, 32), 3)
	f.Add([]byte("0123456789abcdef0123456789abcdef"), 17)
	nodes := randomNodes(rand.New(rand.NewPCG(1, 2)), 20)
	v, err := NewView(nodes)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, k int) {
		var key [32]byte
		copy(key[:], b)
		k = min(max(k, 0), 64)
		got := v.Candidates(key, make([]int, k))
		if want := reference(v, key)[:min(k, v.Len())]; !slices.Equal(got, want) {
			t.Fatalf("key %x: Candidates(%d) = %v, want %v", key, k, got, want)
		}
	})
}

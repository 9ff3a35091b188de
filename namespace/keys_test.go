package namespace

import (
	stdsha256 "crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
)

// refNextKey is the docs/design.md §3 formula written with the standard library,
// as an independent reference.
func refNextKey(prev Key, page []uint32) Key {
	h := stdsha256.New()
	h.Write(prev[:])
	for _, t := range page {
		h.Write(binary.LittleEndian.AppendUint32(nil, t))
	}
	return Key(h.Sum(nil))
}

func randTokens(r *rand.Rand, n int) []uint32 {
	toks := make([]uint32, n)
	for i := range toks {
		toks[i] = r.Uint32()
	}
	return toks
}

func testRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

func TestPageKeys(t *testing.T) {
	r := testRand(t)
	id := llama3_8B().ID()
	for _, pt := range []int{1, 3, 16, 64, 256, 257, 1024} {
		for _, n := range []int{0, pt - 1, pt, 5*pt + pt/2, 9 * pt} {
			toks := randTokens(r, n)
			keys := PageKeys(id, toks, pt)
			if len(keys) != n/pt {
				t.Fatalf("pt %d, %d tokens: %d keys, want %d (full pages only)", pt, n, len(keys), n/pt)
			}
			prev := Key(id)
			for i, k := range keys {
				page := toks[i*pt : (i+1)*pt]
				if want := refNextKey(prev, page); k != want {
					t.Fatalf("pt %d: key %d = %s, want %s", pt, i, k, want)
				}
				if nk := NextKey(prev, page); nk != k {
					t.Fatalf("pt %d: NextKey disagrees with PageKeys at %d", pt, i)
				}
				prev = k
			}
		}
	}
}

func TestPageKeysChainProperties(t *testing.T) {
	r := testRand(t)
	const pt = 16
	a, b := llama3_8B().ID(), with(llama3_8B(), func(d *Descriptor) { d.TPSize = 2 }).ID()
	toks := randTokens(r, 40*pt+5)
	ka := PageKeys(a, toks, pt)

	// A prefix of the tokens gives a prefix of the keys.
	if got := PageKeys(a, toks[:17*pt+3], pt); !slices.Equal(got, ka[:17]) {
		t.Fatal("keys of a token prefix are not a prefix of the keys")
	}
	// Continuing a chain gives the same keys as hashing in one go, and
	// reuses dst.
	dst := make([]Key, 0, len(ka))
	dst = AppendPageKeys(dst, Key(a), toks[:10*pt], pt)
	dst = AppendPageKeys(dst, dst[len(dst)-1], toks[10*pt:], pt)
	if !slices.Equal(dst, ka) {
		t.Fatal("AppendPageKeys continuation differs from PageKeys")
	}
	// Changing one token changes its page's key and every later one, and
	// no earlier one.
	mut := slices.Clone(toks)
	mut[20*pt+7]++
	km := PageKeys(a, mut, pt)
	for i := range ka {
		if (ka[i] == km[i]) != (i < 20) {
			t.Fatalf("after changing a token of page 20, key %d equal=%v", i, ka[i] == km[i])
		}
	}
	// Another namespace shares no key.
	kb := PageKeys(b, toks, pt)
	seen := map[Key]bool{}
	for _, k := range ka {
		seen[k] = true
	}
	for _, k := range kb {
		if seen[k] {
			t.Fatal("keys of two namespaces alias")
		}
	}
}

func TestAppendPageKeysAllocs(t *testing.T) {
	toks := randTokens(testRand(t), 4096)
	id := Key(llama3_8B().ID())
	dst := make([]Key, 0, 256)
	for _, pt := range []int{16, 256} {
		if n := testing.AllocsPerRun(20, func() { dst = AppendPageKeys(dst[:0], id, toks, pt) }); n != 0 {
			t.Errorf("page_tokens %d: %v allocations per call, want 0", pt, n)
		}
	}
	if n := testing.AllocsPerRun(20, func() { _ = NextKey(id, toks[:16]) }); n != 0 {
		t.Errorf("NextKey: %v allocations, want 0", n)
	}
}

func TestPageKeysPanicsOnBadPageSize(t *testing.T) {
	for _, pt := range []int{0, -1} {
		panics.Expect(t, fmt.Sprintf("PageKeys with pageTokens %d", pt), func() { PageKeys(ID{}, []uint32{1, 2}, pt) })
	}
}

func TestKeyFromEngineHash(t *testing.T) {
	id := llama3_8B().ID()
	h := stdsha256.Sum256([]byte("engine hash"))
	got := KeyFromEngineHash(id, h[:])
	want := Key(stdsha256.Sum256(slices.Concat([]byte("strata/engine-hash/v1\x00"), id[:], h[:])))
	if got != want {
		t.Fatalf("KeyFromEngineHash = %s, want %s", got, want)
	}
	if KeyFromEngineHash(with(llama3_8B(), func(d *Descriptor) { d.Tenant = "globex" }).ID(), h[:]) == got {
		t.Fatal("the same engine hash maps to the same key in two namespaces")
	}
	// An engine hash never collides with a native key whose page bytes
	// happen to equal it (page_tokens 8 makes the lengths match).
	var page [8]uint32
	for i := range page {
		page[i] = binary.LittleEndian.Uint32(h[4*i:])
	}
	if NextKey(Key(id), page[:]) == got {
		t.Fatal("engine-derived key collides with a native key")
	}
}

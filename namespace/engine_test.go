package namespace

import (
	"bytes"
	stdsha256 "crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
)

func TestSGLangPageHash(t *testing.T) {
	toks := []uint32{1, 2, 3, 0xffffffff}
	var le []byte
	for _, v := range toks {
		le = binary.LittleEndian.AppendUint32(le, v)
	}
	h0 := stdsha256.Sum256(le)
	if got := SGLangPageHash("", toks); got != hex.EncodeToString(h0[:]) {
		t.Fatalf("first page = %s, want sha256(LE tokens) %x", got, h0)
	}
	// The prior is fed as its raw 32 bytes, not as hex text.
	h1 := stdsha256.Sum256(append(h0[:], le...))
	prior := hex.EncodeToString(h0[:])
	if got := SGLangPageHash(prior, toks); got != hex.EncodeToString(h1[:]) {
		t.Fatalf("chained page = %s, want %x", got, h1)
	}
	if got := SGLangPageHash(strings.ToUpper(prior), toks); got != hex.EncodeToString(h1[:]) {
		t.Fatal("upper-case prior hex (which bytes.fromhex accepts) hashes differently")
	}
	panics.Expect(t, "a prior that is not hex", func() { SGLangPageHash("not hex", toks) })
}

func TestSGLangPageHashes(t *testing.T) {
	r := testRand(t)
	for _, pt := range []int{1, 16, 64, 300} {
		toks := randTokens(r, 7*pt+pt/2)
		got := SGLangPageHashes(toks, pt)
		if len(got) != 7 {
			t.Fatalf("page %d: %d hashes, want 7 (full pages only)", pt, len(got))
		}
		prior := ""
		for i, h := range got {
			want := SGLangPageHash(prior, toks[i*pt:(i+1)*pt])
			if h != want {
				t.Fatalf("page %d: hash %d = %s, want %s", pt, i, h, want)
			}
			prior = h
		}
	}
}

func TestVLLMNoneHash(t *testing.T) {
	// Published for PYTHONHASHSEED=0 by independent vLLM-compatible
	// implementations (sha256(cbor2 "0") = sha256(0x61 0x30)).
	const seed0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
	if got := hex.EncodeToString(VLLMNoneHash("0")); got != seed0 {
		t.Fatalf("VLLMNoneHash(\"0\") = %s, want %s", got, seed0)
	}
	// vLLM 0.33's seed when PYTHONHASHSEED is unset; the same digest is
	// what the installed wheel's init_none_hash(sha256_cbor) gives
	// (python/tests/test_vllm.py checks the Python helper against it).
	const unset = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"
	if got := hex.EncodeToString(VLLMNoneHash(VLLMDefaultNoneHashSeed)); got != unset {
		t.Fatalf("VLLMNoneHash(VLLMDefaultNoneHashSeed) = %s, want %s", got, unset)
	}
	long := strings.Repeat("s", 300)
	want := stdsha256.Sum256(append([]byte{0x79, 0x01, 0x2c}, long...))
	if got := VLLMNoneHash(long); !bytes.Equal(got, want[:]) {
		t.Fatal("VLLMNoneHash of a 300-byte seed does not use a 2-byte CBOR length")
	}
}

// refVLLMBlockHash encodes the whole (parent, tokens, extra) tuple with the
// CBOR library, as an independent reference for the hand-rolled encoder.
func refVLLMBlockHash(t *testing.T, parent []byte, toks []uint32, extra any) []byte {
	t.Helper()
	items := make([]any, len(toks))
	for i, v := range toks {
		items[i] = uint64(v)
	}
	b, err := vllmCBOR().Marshal([]any{parent, items, extra})
	if err != nil {
		t.Fatal(err)
	}
	s := stdsha256.Sum256(b)
	return s[:]
}

func TestVLLMBlockHashMatchesCBORLibrary(t *testing.T) {
	r := testRand(t)
	widths := []uint32{0, 1, 23, 24, 255, 256, 65535, 65536, 1 << 24, 0xffffffff}
	none := VLLMNoneHash("0")
	for _, n := range []int{0, 1, 16, 23, 24, 255, 256, 300, 70000} {
		toks := randTokens(r, n)
		for i := range toks {
			if i%3 == 0 {
				toks[i] = widths[r.IntN(len(widths))]
			}
		}
		for _, extra := range []any{nil, []any{"my-lora"}, []any{}, []any{"lora", []any{"mm-hash", -3}, "salt", []byte{1, 2}}} {
			got := VLLMBlockHash(none, toks, extra)
			if want := refVLLMBlockHash(t, none, toks, extra); !bytes.Equal(got, want) {
				t.Fatalf("%d tokens, extra %v: hand-rolled CBOR differs from the library", n, extra)
			}
		}
	}
	// Typed slices encode like []any, and an empty tuple is not None.
	if !bytes.Equal(VLLMBlockHash(none, []uint32{1}, []string{"a", "b"}), VLLMBlockHash(none, []uint32{1}, []any{"a", "b"})) {
		t.Fatal("[]string and []any extra keys differ")
	}
	if bytes.Equal(VLLMBlockHash(none, []uint32{1}, []any{}), VLLMBlockHash(none, []uint32{1}, nil)) {
		t.Fatal("an empty tuple hashes like None")
	}
}

// TestVLLMCBOROptionsMatchCbor2 checks the CBOR options against hashes that
// cbor2.dumps(..., canonical=True) produced, as published for cross-language
// checks of older vLLM versions whose parent was the hash as a Python int
// (a 256-bit bignum, CBOR tag 2): they exercise bignums, small and 3-byte
// integers, empty and non-empty tuples and text strings.
func TestVLLMCBOROptionsMatchCbor2(t *testing.T) {
	none := VLLMNoneHash("0")
	asInt := func(b []byte) *big.Int { return new(big.Int).SetBytes(b) }
	h := func(parent []byte, toks []any, extra []any) []byte {
		b, err := vllmCBOR().Marshal([]any{asInt(parent), toks, extra})
		if err != nil {
			t.Fatal(err)
		}
		s := stdsha256.Sum256(b)
		return s[:]
	}
	h1 := h(none, []any{1, 2, 3}, []any{})
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"(none, (1,2,3), ())", h1, "f05cc9eb85766390ac54a56f956bde6ad4fd0d0d9465d7fd1e88ab61ca7a31c4"},
		{"(h1, (1,2,3), ())", h(h1, []any{1, 2, 3}, []any{}), "2ae4de831eba33f8e9977f0ca1ae0718ef455be797864c4cfd426c4c2c4d41dc"},
		{"(none, (100,200,300,65536), ())", h(none, []any{100, 200, 300, 65536}, []any{}), "b7ffbdfbd8edaf74c1401c9773559d9fab3e5b0cc32399dd8e8ebda21cae1399"},
		{"(none, (1,2,3), ('image_hash:abc123',))", h(none, []any{1, 2, 3}, []any{"image_hash:abc123"}), "b13bcd05a97c5b22c69a302305912db74382ac70a4075aa31df8750745ed85af"},
	} {
		if got := hex.EncodeToString(c.got); got != c.want {
			t.Errorf("%s = %s, want %s", c.name, got, c.want)
		}
	}
	// Maps sort length-first, then bytewise, as cbor2's canonical mode does.
	b, err := vllmCBOR().Marshal(map[string]int{"bb": 1, "a": 2, "c": 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0xa3, 0x61, 'a', 2, 0x61, 'c', 3, 0x62, 'b', 'b', 1}; !bytes.Equal(b, want) {
		t.Fatalf("map encoding %x, want %x", b, want)
	}
}

func TestVLLMBlockHashes(t *testing.T) {
	r := testRand(t)
	none := VLLMNoneHash("42")
	toks := randTokens(r, 10*16+7)
	got := VLLMBlockHashes(none, toks, 16)
	if len(got) != 10 {
		t.Fatalf("%d hashes, want 10 (full blocks only)", len(got))
	}
	parent := none
	for i, h := range got {
		if want := VLLMBlockHash(parent, toks[i*16:(i+1)*16], nil); !bytes.Equal(h, want) {
			t.Fatalf("block %d differs from VLLMBlockHash", i)
		}
		parent = h
	}
	// The hashes do not alias each other through the shared backing array.
	got[0] = append(got[0], 0)
	if len(got[1]) != 32 || !bytes.Equal(got[1], VLLMBlockHash(got[0][:32], toks[16:32], nil)) {
		t.Fatal("appending to one hash clobbered the next")
	}
}

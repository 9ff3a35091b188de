package namespace

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/panics"
)

// sha256Midstates returns, for each whole page of msg, the hash value
// crypto/sha256 holds after hashing msg from its start through that page
// in one stream: the sha256-blocks keys of msg's pages when the chain
// starts from SHA-256's initial value.
func sha256Midstates(t *testing.T, msg []byte, pageBytes int) []Key {
	t.Helper()
	h := sha256.New()
	var keys []Key
	for off := 0; off+pageBytes <= len(msg); off += pageBytes {
		h.Write(msg[off : off+pageBytes])
		s, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, Key(s[len(shaStateMagic):len(shaStateMagic)+KeySize]))
	}
	return keys
}

// shaInitialKey is SHA-256's initial hash value as a key: the parent key
// under which a sha256-blocks chain is SHA-256's own block chain.
func shaInitialKey(t *testing.T) Key {
	s, err := sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return Key(s[len(shaStateMagic) : len(shaStateMagic)+KeySize])
}

func tokenBytes(toks []uint32) []byte {
	b := make([]byte, 4*len(toks))
	putTokens(b, toks)
	return b
}

// TestBlockKeys: for page sizes 16 to 320 tokens, chains of many lengths
// (for the assembly, around the ends of its chunks), tokens at any
// alignment and a dst that already holds keys, KeyBlocks.AppendPageKeys
// (the assembly where the CPU has the SHA extensions) and the generic
// chain give the same keys; from SHA-256's initial value they are the
// hash values crypto/sha256 passes through as it hashes the tokens in one
// stream.
func TestBlockKeys(t *testing.T) {
	r := testRand(t)
	iv := shaInitialKey(t)
	t.Logf("SHA extensions in use: %v", haveSHANI)
	for pt := 16; pt <= 320; pt += 16 {
		c := shaChunkPages(pt / keyBlockTokens)
		for _, pages := range []int{1, 2, 3, 7, c - 1, c, c + 1, 2*c + 3} {
			if pages < 1 {
				continue
			}
			off := r.IntN(4)
			toks := randTokens(r, off+pages*pt+r.IntN(pt))[off:]
			head := []Key{{1}, {2}}
			for _, prev := range []Key{iv, Key(sum256([]byte{byte(pt), byte(pages)}))} {
				got := KeyBlocks.AppendPageKeys(slices.Clone(head), prev, toks, pt)
				want := appendBlockKeysGeneric(slices.Clone(head), prev, toks, pt, pages)
				if len(got) != len(head)+pages || len(want) != len(got) {
					t.Fatalf("page_tokens %d, %d pages: %d and %d keys, want %d", pt, pages, len(got), len(want), len(head)+pages)
				}
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("page_tokens %d, %d pages: key %d = %s, the generic chain says %s", pt, pages, i, got[i], want[i])
				}
				if prev != iv {
					continue
				}
				mid := sha256Midstates(t, tokenBytes(toks[:pages*pt]), 4*pt)
				if i := firstDiff(got[len(head):], mid); i >= 0 {
					t.Fatalf("page_tokens %d, %d pages: key %d = %s, crypto/sha256's hash value there is %s", pt, pages, i, got[len(head)+i], mid[i])
				}
			}
		}
	}
}

// TestBlockKeysChain: a chain continued from its last key is the chain
// hashed in one call, and keys name their whole prefix: changing one token
// changes the key of its page and of every page after it, not before.
func TestBlockKeysChain(t *testing.T) {
	r := testRand(t)
	id := llama3_8B().ID()
	toks := randTokens(r, 16*10)
	all := KeyBlocks.AppendPageKeys(nil, Key(id), toks, 16)
	split := KeyBlocks.AppendPageKeys(KeyBlocks.AppendPageKeys(nil, Key(id), toks[:16*4], 16), all[3], toks[16*4:], 16)
	if i := firstDiff(all, split); i >= 0 {
		t.Fatalf("continued chain differs at key %d", i)
	}
	toks[16*6+3]++
	changed := KeyBlocks.AppendPageKeys(nil, Key(id), toks, 16)
	for i := range all {
		if (all[i] == changed[i]) != (i < 6) {
			t.Fatalf("after changing a token of page 6, key %d equal=%v", i, all[i] == changed[i])
		}
	}
	if chain := AppendPageKeys(nil, Key(id), toks, 16); chain[0] == changed[0] {
		t.Fatal("sha256-chain and sha256-blocks give the same key")
	}
	if got := KeyBlocks.AppendPageKeys(nil, Key(id), toks[:15], 16); len(got) != 0 {
		t.Fatalf("a partial page got %d keys", len(got))
	}
}

func TestBlockKeysPanics(t *testing.T) {
	for _, tc := range []struct {
		f  KeyFormat
		pt int
	}{{KeyBlocks, 8}, {KeyBlocks, 0}, {KeyBlocks, 24}, {UnknownKeyFormat, 16}, {KeyChain, 0}} {
		panics.Expect(t, fmt.Sprintf("%v.AppendPageKeys with page_tokens %d", tc.f, tc.pt), func() {
			tc.f.AppendPageKeys(nil, Key{}, make([]uint32, 64), tc.pt)
		})
	}
}

func TestAppendBlockKeysAllocs(t *testing.T) {
	if !haveSHANI {
		t.Skip("the generic chain allocates its hash")
	}
	toks := randTokens(testRand(t), 1<<12)
	dst := make([]Key, 0, len(toks)/16)
	if n := testing.AllocsPerRun(20, func() { dst = KeyBlocks.AppendPageKeys(dst[:0], Key{}, toks, 16) }); n != 0 {
		t.Fatalf("%v allocations per chain", n)
	}
}

// TestKeyFormatDescriptor: the default key format leaves the canonical
// encoding (and so every existing namespace ID) as it was; sha256-blocks
// is written after head_dim, decodes back, and Decode rejects the default
// spelled out and names it does not know. Validate holds sha256-blocks to
// whole blocks a page.
func TestKeyFormatDescriptor(t *testing.T) {
	base := llama3_8B()
	chain := with(base, func(d *Descriptor) { d.KeyFormat = KeyChain })
	if !bytes.Equal(base.Canonical(), chain.Canonical()) || bytes.Contains(base.Canonical(), []byte("key_format")) {
		t.Fatalf("an explicit sha256-chain changes the encoding:\n%s\n%s", base.Canonical(), chain.Canonical())
	}
	blocks := with(base, func(d *Descriptor) { d.KeyFormat = KeyBlocks })
	if err := blocks.Validate(); err != nil {
		t.Fatal(err)
	}
	c := blocks.Canonical()
	if !bytes.Contains(c, []byte(`"head_dim":128,"key_format":"sha256-blocks","kv_dtype":`)) {
		t.Fatalf("canonical encoding %s", c)
	}
	if blocks.ID() == base.ID() {
		t.Fatal("sha256-blocks does not change the namespace ID")
	}
	if got := LayoutDiff(base, blocks); !slices.Equal(got, []string{"key_format"}) {
		t.Fatalf("LayoutDiff = %q", got)
	}
	d, err := Decode(c)
	if err != nil || d.KeyFormat != KeyBlocks || d.ID() != blocks.ID() {
		t.Fatalf("Decode: %v, key format %v", err, d.KeyFormat)
	}
	if k := d.PageKeys(d.ID(), make([]uint32, 32)); len(k) != 2 || k[0] != KeyBlocks.AppendPageKeys(nil, Key(d.ID()), make([]uint32, 16), 16)[0] {
		t.Fatal("Descriptor.PageKeys does not follow its key format")
	}
	for _, bad := range []string{
		strings.Replace(string(c), "sha256-blocks", "sha256-chain", 1),
		strings.Replace(string(c), "sha256-blocks", "blake3", 1),
		strings.Replace(string(c), `"sha256-blocks"`, "2", 1),
	} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%s...) = %v, want ErrInvalid", bad[:40], err)
		}
	}
	for _, tc := range []struct {
		d    Descriptor
		want string
	}{
		{with(blocks, func(d *Descriptor) { d.PageTokens = 8 }), "key_format: sha256-blocks needs page_tokens a multiple of 16"},
		{with(base, func(d *Descriptor) { d.KeyFormat = UnknownKeyFormat }), "key_format: unknown format 255"},
	} {
		err := tc.d.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
	for _, s := range []string{"sha256-chain", "sha256-blocks"} {
		f, err := ParseKeyFormat(s)
		if err != nil || f.String() != s {
			t.Errorf("ParseKeyFormat(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseKeyFormat(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseKeyFormat(\"\") = %v", err)
	}
}

// FuzzBlockKeys: KeyBlocks.AppendPageKeys agrees with the generic chain
// for any tokens, parent key and page size.
func FuzzBlockKeys(f *testing.F) {
	f.Add(make([]byte, 4*16*40), []byte("parent"), uint8(1))
	f.Add(make([]byte, 4*64*3+5), []byte{}, uint8(4))
	f.Fuzz(func(t *testing.T, raw, parent []byte, blocks uint8) {
		pt := keyBlockTokens * (int(blocks%20) + 1)
		toks := make([]uint32, len(raw)/4)
		for i := range toks {
			toks[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		prev := Key(sum256(parent))
		got := KeyBlocks.AppendPageKeys(nil, prev, toks, pt)
		want := appendBlockKeysGeneric(nil, prev, toks, pt, len(toks)/pt)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("page_tokens %d, %d tokens: key %d differs from the generic chain", pt, len(toks), i)
		}
	})
}

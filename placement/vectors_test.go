package placement

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stratakv/strata/internal/testing/golden"
)

const vectorsPath = "testdata/vectors.json"

// vectorFile is testdata/vectors.json: the cross-language contract.
type vectorFile struct {
	Comment string       `json:"comment"`
	Views   []vectorView `json:"views"`
}

type vectorView struct {
	Name  string       `json:"name"`
	Nodes []vectorNode `json:"nodes"` // in input order, deliberately not sorted
	Keys  []vectorKey  `json:"keys"`
}

type vectorNode struct {
	ID     string  `json:"id"`
	Weight float64 `json:"weight"`
	Seed   string  `json:"seed"` // 16 hex digits
}

type vectorKey struct {
	Key     string   `json:"key"`     // 64 hex digits
	Hashes  []string `json:"hashes"`  // h per node, in Nodes order, 16 hex digits
	Scores  []string `json:"scores"`  // score per node as binary64 bits, 16 hex digits
	Ranking []string `json:"ranking"` // node IDs, best first
}

func hex64(x uint64) string { return fmt.Sprintf("%016x", x) }

// vectorKeys are SHA-256 outputs plus edge cases: all zeros, all ones, and
// keys that drive the first node's u to 2^-53 and to 1-2^-53.
func vectorKeys(first string) [][32]byte {
	var keys [][32]byte
	for i := range 12 {
		keys = append(keys, sha256.Sum256(fmt.Appendf(nil, "strata placement vector %d", i)))
	}
	var zero, ones [32]byte
	for i := range ones {
		ones[i] = 0xff
	}
	keys = append(keys, zero, ones)
	for _, h := range []uint64{0, math.MaxUint64} {
		var k [32]byte
		binary.LittleEndian.PutUint64(k[:8], unmix64(h)^seedOf(first))
		keys = append(keys, k)
	}
	return keys
}

func buildVectors(t *testing.T) vectorFile {
	const gib = 1 << 30
	views := []struct {
		name  string
		nodes []Node
	}{
		{"three equal", []Node{{"node-b", 1}, {"node-a", 1}, {"node-c", 1}}},
		{"capacity bytes 1:1:2:4", []Node{
			{"10.0.0.4:7420", 256 * gib}, {"10.0.0.1:7420", 64 * gib},
			{"10.0.0.3:7420", 128 * gib}, {"10.0.0.2:7420", 64 * gib},
		}},
		{"mixed ids and weights", []Node{
			{"ノード-1", 3.25}, {"z", 1e15}, {"A", 0.001}, {"é", 7}, {"node with spaces", 0.5},
		}},
		{"single", []Node{{"only", 42}}},
	}
	f := vectorFile{Comment: "strata placement test vectors; see the placement package doc for " +
		"the formula. Regenerate with: go test ./placement/ -run TestVectors -update"}
	for _, tv := range views {
		v := mustView(t, tv.nodes...)
		vv := vectorView{Name: tv.name}
		for _, n := range tv.nodes {
			vv.Nodes = append(vv.Nodes, vectorNode{n.ID, n.Weight, hex64(seedOf(n.ID))})
		}
		for _, key := range vectorKeys(v.Node(0).ID) {
			vk := vectorKey{Key: hex.EncodeToString(key[:])}
			for _, n := range tv.nodes {
				h := mix64(keyWord(&key) ^ seedOf(n.ID))
				vk.Hashes = append(vk.Hashes, hex64(h))
				vk.Scores = append(vk.Scores, hex64(math.Float64bits(score(n.Weight, h))))
			}
			for _, i := range v.Candidates(key, make([]int, v.Len())) {
				vk.Ranking = append(vk.Ranking, v.Node(i).ID)
			}
			vv.Keys = append(vv.Keys, vk)
		}
		f.Views = append(f.Views, vv)
	}
	return f
}

func TestVectors(t *testing.T) {
	got, err := json.MarshalIndent(buildVectors(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden.Check(t, vectorsPath, got, "does not match this implementation: placement changed for every "+
		"deployed client; if that is intended, rerun with -update and update the Python client")
}

// TestVectorsSelfConsistent checks the file's rankings against a plain sort
// of its own scores, so the file alone specifies the order.
func TestVectorsSelfConsistent(t *testing.T) {
	var f vectorFile
	b, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, vv := range f.Views {
		for _, vk := range vv.Keys {
			ids := make([]string, len(vv.Nodes))
			for i, n := range vv.Nodes {
				ids[i] = n.ID
			}
			slices.SortFunc(ids, func(a, b string) int {
				return vectorCompare(vv, vk, a, b)
			})
			if !slices.Equal(ids, vk.Ranking) {
				t.Errorf("%s key %s: ranking %v, sorting its scores gives %v", vv.Name, vk.Key, vk.Ranking, ids)
			}
		}
	}
}

func vectorCompare(vv vectorView, vk vectorKey, a, b string) int {
	at := func(id string) (float64, string) {
		for i, n := range vv.Nodes {
			if n.ID == id {
				var bits uint64
				fmt.Sscanf(vk.Scores[i], "%x", &bits)
				return math.Float64frombits(bits), vk.Hashes[i]
			}
		}
		panic("unknown id " + id)
	}
	sa, ha := at(a)
	sb, hb := at(b)
	switch {
	case sa != sb:
		if sa > sb {
			return -1
		}
		return 1
	case ha != hb: // fixed-width hex compares like the numbers
		if ha > hb {
			return -1
		}
		return 1
	case a < b:
		return -1
	}
	return 1
}

// TestPythonVectors checks the Python client's placement (stdlib only)
// against the vectors; it skips where python3 is not installed.
func TestPythonVectors(t *testing.T) {
	golden.Python(t, "testdata/check_vectors.py", vectorsPath)
}

package arch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ranks orders the module's packages from the bottom of the tree up: a
// package's non-test files import only packages of a strictly lower rank,
// so that no arrow points up (ARCHITECTURE.md, "Layers"). Packages of one
// rank are peers and never import each other. Tests may import anything
// the layers table lets them: a test sits outside the graph it checks.
// Test helpers rank above every production package, so that nothing the
// node or the client is built from can import one.
var ranks = map[string]int{
	// Leaves.
	"internal/cpuid": 0, "internal/grpcbuf": 0, "internal/certs": 0, "internal/ntcopy": 0,
	"placement": 0, "eviction": 0, "events": 0, "proto/strata/v1": 0, "rdma": 0,
	"internal/testing/testcerts": 0, // a leaf; strata-load makes its CA with it too (helperUsers)
	"internal/crc32c":            1, "internal/dial": 1,
	"namespace": 2,

	// Wire formats and the node's parts.
	"proto/frame": 3, "proto/pbconv": 3, "tiers": 3, "registry": 3, "membership": 3,
	"transfer":  3,
	"transport": 4, "store": 4, "metrics": 4, "eviction/coord": 4,
	"server": 5, "peer": 5,
	"node": 6,

	// The client side: beside the node, never above or below it.
	"client":       6,
	"client/admin": 7,

	// Programs and benchmarks.
	"cmd/stratad": 8, "cmd/strata": 8, "cmd/libstrata": 8, "cmd/strata-sim": 8, "cmd/strata-cluster-sim": 8, "benchmarks/load": 8,
	"python/tests/gowriter": 8,
	"cmd/strata-load":       9,

	// Test helpers and test-only packages: above everything they exercise.
	"internal/testing/corrupt": 10, "internal/testing/golden": 10, "internal/testing/panics": 10,
	"internal/testing/poll": 10, "internal/testing/scrape": 10, "internal/testing/splitbuf": 10,
	"internal/testing/testlog": 10, "internal/testing/testseed": 10,
	"internal/testing/stacks":    11, // waits with poll
	"internal/testing/leaktest":  12, // waits with poll, finds with stacks
	"internal/testing/testnode":  11,
	"internal/testing/admintest": 12,
	"benchmarks":                 13, "deploy": 13, "internal/arch": 13,
}

// helperUsers names the production packages allowed to import a test
// helper, with why: strata-load's TLS systems make a throwaway CA at start.
var helperUsers = map[string]string{"benchmarks/load": "internal/testing/testcerts"}

// upward returns a line for each non-test import in files that does not
// point strictly down the ranks, each package missing from ranks, and each
// production package importing a test helper.
func upward(files []file, ranks map[string]int) []string {
	var errs []string
	missing := map[string]bool{}
	rankOf := func(pkg string) (int, bool) {
		r, ok := ranks[pkg]
		if !ok && !missing[pkg] {
			missing[pkg] = true
			errs = append(errs, fmt.Sprintf("package %s has no rank in internal/arch/rank_test.go: add it above everything it imports", pkg))
		}
		return r, ok
	}
	for _, f := range files {
		if f.test {
			continue
		}
		from, ok := rankOf(f.pkg)
		for _, p := range f.imports {
			imp, in := strings.CutPrefix(p, module)
			if !in {
				continue
			}
			to, known := rankOf(imp)
			if ok && known && to >= from {
				errs = append(errs, fmt.Sprintf("%s (rank %d) imports %s (rank %d): an arrow up or sideways the tree", f.rel, from, imp, to))
			}
			if strings.HasPrefix(imp, "internal/testing/") && !strings.HasPrefix(f.pkg, "internal/testing/") &&
				helperUsers[f.pkg] != imp && ranks[f.pkg] < ranks["internal/testing/corrupt"] {
				errs = append(errs, fmt.Sprintf("%s imports test helper %s from production code", f.rel, imp))
			}
		}
	}
	slices.Sort(errs)
	return slices.Compact(errs)
}

// TestNoUpwardImports: the tree's import arrows all point down.
func TestNoUpwardImports(t *testing.T) {
	files := parseTree(t)
	for _, e := range upward(files, ranks) {
		t.Error(e)
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.pkg] = true
	}
	for pkg := range ranks {
		if !seen[pkg] {
			t.Errorf("ranks in internal/arch/rank_test.go names %s, which has no Go files: remove or rename it", pkg)
		}
	}
}

// TestUpwardImportFails shows the check catches what it is for: the real
// tree with one upward arrow added (the store importing the server, and a
// test helper imported by the node) fails it, naming the arrow.
func TestUpwardImportFails(t *testing.T) {
	files := parseTree(t)
	broken := append(slices.Clone(files),
		file{rel: "store/added.go", pkg: "store", imports: []string{module + "server"}},
		file{rel: "node/added.go", pkg: "node", imports: []string{module + "internal/testing/poll"}},
		file{rel: "client/added.go", pkg: "client", imports: []string{module + "node"}})
	errs := upward(broken, ranks)
	for _, want := range []string{
		"store/added.go (rank 4) imports server (rank 5)",
		"node/added.go (rank 6) imports internal/testing/poll (rank 10)",
		"node/added.go imports test helper internal/testing/poll",
		"client/added.go (rank 6) imports node (rank 6)",
	} {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("an added arrow went unnoticed: no error starting %q in %q", want, errs)
		}
	}
	if got := upward(files, ranks); len(errs) != len(got)+4 {
		t.Errorf("the broken tree gives %d errors, the real one %d: want exactly the 4 added", len(errs), len(got))
	}
}

package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stratakv/strata/"

// layers lists every Go package of the module (path from the module root)
// and the strata packages it may import: imports for its non-test files,
// tests for what its test files may import besides. A package missing here,
// or a line naming a package that no longer exists, fails the test: when
// packages move or appear, edit this table.
var layers = map[string]struct{ imports, tests string }{
	// Pure leaves: no strata imports but their own helpers.
	"eviction":                  {"", "internal/testing/panics"},
	"placement":                 {"", "internal/testing/golden"},
	"namespace":                 {"internal/cpuid internal/crc32c", "internal/testing/golden internal/testing/panics"},
	"internal/crc32c":           {"internal/cpuid", ""},
	"internal/cpuid":            {"", ""},
	"internal/ntcopy":           {"", ""},
	"internal/certs":            {"", "internal/testing/testcerts"},
	"internal/dial":             {"internal/certs", ""},
	"internal/grpcbuf":          {"", ""},
	"internal/testing/splitbuf": {"", ""},
	"proto/strata/v1":           {"", ""},
	"rdma":                      {"", ""},
	"events":                    {"", "internal/testing/leaktest internal/testing/poll"},

	// Wire formats and transport mechanics.
	"proto/frame":  {"namespace", ""},
	"proto/pbconv": {"namespace proto/strata/v1 rdma", ""},
	"transport":    {"internal/ntcopy proto/frame", "internal/testing/leaktest internal/testing/poll internal/testing/stacks internal/testing/testcerts namespace tiers"},

	// The node's parts.
	"tiers":          {"internal/crc32c", "internal/testing/corrupt internal/testing/leaktest internal/testing/panics internal/testing/poll internal/testing/testlog internal/testing/testseed"},
	"store":          {"eviction internal/crc32c namespace tiers", "internal/testing/leaktest internal/testing/poll"},
	"registry":       {"", "internal/testing/leaktest internal/testing/poll internal/testing/stacks internal/testing/testlog"},
	"membership":     {"", "internal/testing/leaktest internal/testing/poll internal/testing/testlog"},
	"transfer":       {"namespace", ""},
	"eviction/coord": {"eviction membership registry", "internal/testing/leaktest internal/testing/poll internal/testing/testlog"},
	"peer":           {"internal/dial membership namespace placement proto/strata/v1 store transfer", "internal/testing/leaktest internal/testing/poll"},
	"metrics":        {"namespace", "client events internal/testing/poll internal/testing/testnode node transfer"},
	"server": {"membership metrics namespace proto/frame proto/pbconv proto/strata/v1 rdma store tiers transfer transport",
		"client internal/testing/leaktest internal/testing/poll internal/testing/splitbuf internal/testing/testnode node"},
	"node": {"events eviction/coord peer transfer internal/certs internal/dial internal/grpcbuf membership metrics namespace placement proto/strata/v1 rdma registry server store tiers transport",
		"client internal/testing/leaktest internal/testing/poll internal/testing/scrape internal/testing/testcerts internal/testing/testnode proto/frame proto/pbconv registry server transport"},

	// The client side.
	"client": {"internal/crc32c internal/dial internal/grpcbuf namespace placement proto/frame proto/pbconv proto/strata/v1 rdma transfer transport",
		"events internal/testing/leaktest internal/testing/poll internal/testing/scrape internal/testing/splitbuf internal/testing/stacks internal/testing/testlog internal/testing/testnode internal/testing/testseed membership node"},
	"client/admin":               {"internal/dial proto/strata/v1", "internal/testing/admintest internal/testing/leaktest internal/testing/testnode namespace node proto/pbconv"},
	"internal/testing/admintest": {"internal/testing/testnode node proto/strata/v1", ""},

	// Programs, benchmarks and deployment checks.
	"cmd/stratad":            {"node", "client client/admin events internal/testing/corrupt internal/testing/poll internal/testing/scrape internal/testing/testnode namespace placement proto/frame proto/strata/v1 registry transfer transport"},
	"cmd/strata":             {"client/admin namespace proto/pbconv proto/strata/v1 registry", "client internal/testing/admintest internal/testing/poll internal/testing/testnode node"},
	"cmd/strata-load":        {"benchmarks/load", ""},
	"cmd/libstrata":          {"client namespace proto/frame", ""},
	"cmd/strata-sim":         {"eviction eviction/coord peer membership namespace placement store tiers", "internal/testing/leaktest"},
	"cmd/strata-cluster-sim": {"eviction eviction/coord membership namespace peer placement store", "internal/testing/leaktest"},
	"benchmarks":             {"", "benchmarks/load client internal/testing/testnode namespace node proto/strata/v1"},
	"benchmarks/load":        {"client events internal/testing/testcerts namespace node transport", "internal/testing/leaktest internal/testing/poll"},
	"deploy":                 {"", "client internal/testing/testnode namespace node"},
	"python/tests/gowriter":  {"client namespace", ""},

	// Test helpers (imported by tests only) and this test.
	"internal/arch":              {"", ""},
	"internal/testing/corrupt":   {"", ""},
	"internal/testing/golden":    {"", ""},
	"internal/testing/leaktest":  {"internal/testing/poll internal/testing/stacks", ""},
	"internal/testing/panics":    {"", ""},
	"internal/testing/poll":      {"", ""},
	"internal/testing/scrape":    {"", ""},
	"internal/testing/stacks":    {"internal/testing/poll", ""},
	"internal/testing/testlog":   {"", ""},
	"internal/testing/testnode":  {"membership namespace node proto/pbconv proto/strata/v1 registry", "internal/testing/leaktest"},
	"internal/testing/testseed":  {"", ""},
	"internal/testing/testcerts": {"", ""},
}

// pending names imports that break a rule today and are being removed,
// with why; the test fails once one is gone, so that its line is deleted
// too. Add lines as {"pkg", "imported pkg", "why"}.
var pending = []struct{ pkg, imp, why string }{}

// owners names, for each external system (import path prefix), the one
// package allowed to import it (tests included).
var owners = []struct{ prefix, pkg string }{
	{"go.etcd.io/etcd/", "registry"},
	{"go.uber.org/zap", "registry"}, // etcd's logger
	{"github.com/hashicorp/memberlist", "membership"},
	{"github.com/dgraph-io/ristretto", "client"},
	{"github.com/ebitengine/purego", "tiers"}, // libcuda
	// cgo: two systems behind one import path, libibverbs (rdma) and the C
	// ABI the Python client's native plane calls (cmd/libstrata).
	{"C", "rdma cmd/libstrata"},
	{"github.com/prometheus/", "metrics"},
	{"github.com/spf13/cobra", "cmd/strata"},
	{"gonum.org/", "benchmarks/load"},
	{"github.com/schollz/progressbar", "benchmarks/load"},
	{"go.yaml.in/yaml/", "cmd/stratad"}, // the config file
	{"github.com/go-zeromq/", "events"},
	{"github.com/vmihailenco/msgpack", "events"},
}

// wire lists the packages that may import gRPC and protobuf: the
// wire-facing ones. tests: packages whose tests may besides.
var wire = struct{ imports, tests string }{
	imports: "proto/strata/v1 proto/pbconv server client client/admin internal/testing/admintest node registry cmd/strata peer " +
		"internal/dial internal/grpcbuf internal/testing/splitbuf internal/testing/testnode",
	tests: "benchmarks cmd/stratad",
}

// grpcFree are packages whose whole dependency graph must hold no gRPC
// package; grpcPending those allowed it for now, with why (the test fails
// once it is no longer needed).
var (
	grpcFree    = []string{"store", "namespace", "eviction"}
	grpcPending = map[string]string{}
)

// file is one Go file's imports.
type file struct {
	rel, pkg string
	test     bool
	imports  []string
}

// parseTree reads the imports of every Go file of the module, whatever its
// build tags.
func parseTree(t *testing.T) []file {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found two levels above the package: %v", err)
	}
	var files []file
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("parsing %s: %v", path, err)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fl := file{rel: filepath.ToSlash(rel), pkg: filepath.ToSlash(filepath.Dir(rel)), test: strings.HasSuffix(path, "_test.go")}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			fl.imports = append(fl.imports, p)
		}
		files = append(files, fl)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLayers: each strata import is one the layers table allows.
func TestLayers(t *testing.T) {
	seen := map[string]bool{}
	used := map[int]bool{}
	unknown := map[string]string{} // imported package → a file importing it
	for _, f := range parseTree(t) {
		seen[f.pkg] = true
		rule, ok := layers[f.pkg]
		if !ok {
			continue // reported once below
		}
		allowed := strings.Fields(rule.imports)
		if f.test {
			allowed = append(append(allowed, strings.Fields(rule.tests)...), f.pkg)
		}
	imports:
		for _, p := range f.imports {
			imp, ok := strings.CutPrefix(p, module)
			if !ok || slices.Contains(allowed, imp) {
				continue
			}
			for i, e := range pending {
				if e.pkg == f.pkg && e.imp == imp {
					used[i] = true
					continue imports
				}
			}
			if _, known := layers[imp]; !known {
				unknown[imp] = f.rel // reported once below
				continue
			}
			which := "imports"
			if f.test {
				which = "tests"
			}
			t.Errorf("%s imports %s, which package %s may not import: fix the import, or, if the layering should change, add %s to the %s of %q in internal/arch/arch_test.go's layers table",
				f.rel, imp, f.pkg, imp, which, f.pkg)
		}
	}
	for imp, by := range unknown {
		if seen[imp] {
			continue // reported as a package without a line
		}
		t.Errorf("%s imports %s, which is not in the layers table of internal/arch/arch_test.go: add a line for it", by, imp)
	}
	for pkg := range seen {
		if _, ok := layers[pkg]; !ok {
			t.Errorf("package %s is not in the layers table of internal/arch/arch_test.go: add a line saying which strata packages it may import", pkg)
		}
	}
	for pkg := range layers {
		if !seen[pkg] {
			t.Errorf("the layers table of internal/arch/arch_test.go names %s, which has no Go files: remove or rename its line", pkg)
		}
	}
	for i, e := range pending {
		if !used[i] {
			t.Errorf("pending entry %s → %s (%s) is no longer needed: delete it from internal/arch/arch_test.go", e.pkg, e.imp, e.why)
		}
	}
}

// TestExternalSystemsHaveOneImporter pins STYLE.md's rule that each
// external system is imported by exactly one package (tests included),
// and that gRPC and protobuf stay in the wire-facing packages.
func TestExternalSystemsHaveOneImporter(t *testing.T) {
	for _, f := range parseTree(t) {
		for _, p := range f.imports {
			for _, o := range owners {
				if (p == o.prefix || strings.HasPrefix(p, o.prefix)) && !slices.Contains(strings.Fields(o.pkg), f.pkg) {
					t.Errorf("%s imports %s; only package %s may", f.rel, p, o.pkg)
				}
			}
			if !strings.HasPrefix(p, "google.golang.org/grpc") && !strings.HasPrefix(p, "google.golang.org/protobuf") &&
				!strings.HasPrefix(p, "google.golang.org/genproto") {
				continue
			}
			ok := slices.Contains(strings.Fields(wire.imports), f.pkg) || f.test && slices.Contains(strings.Fields(wire.tests), f.pkg)
			for _, e := range pending {
				ok = ok || f.pkg == e.pkg // a pending package's wire imports go with its pending entry
			}
			if !ok {
				t.Errorf("%s imports %s; gRPC and protobuf belong to the wire-facing packages (%s; tests of %s)", f.rel, p, wire.imports, wire.tests)
			}
		}
	}
}

// TestCoreLinksNoGRPC: the store, namespace and eviction link no gRPC
// package (go list -deps).
func TestCoreLinksNoGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range grpcFree {
		out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var grpc []string
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") {
				grpc = append(grpc, dep)
			}
		}
		why, isPending := grpcPending[pkg]
		switch {
		case len(grpc) > 0 && !isPending:
			t.Errorf("go list -deps ./%s holds %d gRPC packages (%s, ...): the core must not link gRPC", pkg, len(grpc), grpc[0])
		case len(grpc) > 0:
			t.Logf("%s links %d gRPC packages, allowed for now: %s", pkg, len(grpc), why)
		case isPending:
			t.Errorf("%s links no gRPC package any more: delete its grpcPending entry (%s) from internal/arch/arch_test.go", pkg, why)
		}
	}
}

package node_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestExternalSystemsHaveOneImporter pins STYLE.md's rule that each
// external system is imported by exactly one package (tests included).
func TestExternalSystemsHaveOneImporter(t *testing.T) {
	owners := []struct{ prefix, pkg string }{
		{"go.etcd.io/etcd/", "registry"},
		{"github.com/hashicorp/memberlist", "membership"},
		{"github.com/dgraph-io/ristretto", "client"},
		{"github.com/ebitengine/purego", "tiers"},
		{"github.com/prometheus/", "metrics"},
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("module root not found above the package: %v", err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "python") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // the build will say
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, o := range owners {
				if strings.HasPrefix(p, o.prefix) && pkg != o.pkg {
					t.Errorf("%s imports %s; only package %s may", rel, p, o.pkg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

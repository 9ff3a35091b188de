package membership

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyMembershipImportsMemberlist pins the rule that each external
// system is imported by exactly one package (STYLE.md): memberlist, by
// this one.
func TestOnlyMembershipImportsMemberlist(t *testing.T) {
	t.Parallel()
	const banned = "github.com/hashicorp/memberlist"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("module root not found above the package: %v", err)
	}
	self := filepath.Join(root, "membership")
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path == self || (path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "vendor" || name == "node_modules")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		checked++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			// A file that doesn't parse (another package mid-edit) is the
			// build's to report; still catch the import textually.
			src, rerr := os.ReadFile(path)
			if rerr == nil && bytes.Contains(src, []byte(strconv.Quote(banned))) {
				t.Errorf("%s mentions %s; only package membership may import it", rel, banned)
			}
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("%s imports %s; only package membership may import memberlist", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files found outside membership/")
	}
}

package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTheRequestLayerCallsTheStore parses the package's files and
// fails on a use of the server's store (s.cfg.Store) outside the request
// layer (requests*.go): the handlers of every wire decode, call the layer
// and encode (requests.go).
func TestOnlyTheRequestLayerCallsTheStore(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	layer := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		inLayer := strings.HasPrefix(name, "requests")
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Store" {
				return true
			}
			if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "cfg" {
				if inLayer {
					layer++
				} else {
					t.Errorf("%s: the store is called outside the request layer (requests*.go)", fset.Position(sel.Pos()))
				}
			}
			return true
		})
	}
	if layer == 0 {
		t.Fatal("found no use of the store in the request layer: the test no longer sees it")
	}
}

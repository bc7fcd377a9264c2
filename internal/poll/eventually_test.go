package poll

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoFailingConditionInEventually keeps the module's tests free of
// conditions of testify's Eventually or Never that fail the test themselves
// (a require, t.Fatal, FailNow): in the condition's goroutine such a
// failure hangs the wait until its timeout and can panic the binary after
// the test ended. Such a condition goes to Until.
func TestNoFailingConditionInEventually(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	var found []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isCall(call, "Eventually", "Never") {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.FuncLit); ok && failsTest(lit.Body) {
					rel, _ := filepath.Rel(root, fset.Position(call.Pos()).Filename)
					found = append(found, rel+":"+strconv.Itoa(fset.Position(call.Pos()).Line))
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "conditions that fail the test inside require/assert.Eventually: use poll.Until")
}

// isCall reports whether call is require.X or assert.X for a name in names.
func isCall(call *ast.CallExpr, names ...string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || (pkg.Name != "require" && pkg.Name != "assert") {
		return false
	}
	for _, n := range names {
		if sel.Sel.Name == n {
			return true
		}
	}
	return false
}

// failsTest reports whether body calls require.*, or Fatal, Fatalf or
// FailNow on anything.
func failsTest(body *ast.BlockStmt) bool {
	fails := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !fails
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "require" {
				fails = true
			}
			switch sel.Sel.Name {
			case "Fatal", "Fatalf", "FailNow":
				fails = true
			}
		}
		return !fails
	})
	return fails
}

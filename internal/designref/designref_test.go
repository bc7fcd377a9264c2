package designref

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found")
		dir = parent
	}
}

// goComments returns the comments of every Go file of the module, by file.
func goComments(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		var b strings.Builder
		for _, cg := range f.Comments {
			b.WriteString(cg.Text())
		}
		out[p] = b.String()
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestLinksInCommentsResolve: every docs/design/<file>#<anchor> a Go
// comment names exists.
func TestLinksInCommentsResolve(t *testing.T) {
	root := moduleRoot(t)
	r, err := NewResolver(root)
	require.NoError(t, err)
	require.NotEmpty(t, r.anchors["seed-000.md"], "docs/design holds the seed pages")
	for file, text := range goComments(t, root) {
		for _, err := range r.Check(text) {
			t.Errorf("%s: %v", file, err)
		}
	}
}

// TestEveryCitationHasATarget: every citation the comments still make in
// the old form maps to a page and anchor that exist, so the mechanical
// rewrite (scripts/refsrewrite) leaves only resolving links.
func TestEveryCitationHasATarget(t *testing.T) {
	root := moduleRoot(t)
	r, err := NewResolver(root)
	require.NoError(t, err)
	for file, text := range goComments(t, root) {
		out, _ := Rewrite(text)
		for _, err := range r.Check(out) {
			t.Errorf("%s: %v", file, err)
		}
	}
}

func TestRewriteForms(t *testing.T) {
	for in, want := range map[string]string{
		"(REFERENCE §1.3, §1.4, §5)":    "(docs/design/reference.md#s1-3, docs/design/reference.md#s1-4, docs/design/reference.md#s5)",
		"REFERENCE §6.2–6.3":            "docs/design/reference.md#s6-2, docs/design/reference.md#s6-3",
		"REFERENCE §3 and §7":           "docs/design/reference.md#s3 and docs/design/reference.md#s7",
		"REFERENCE §3/§7: x":            "docs/design/reference.md#s3, docs/design/reference.md#s7: x",
		"seed 000 step 3":               "docs/design/seed-000.md#step-3",
		"(seed 001)":                    "(docs/design/seed-001.md)",
		"CODEX.md §6; OPENCLAW.md §1.4": "docs/design/codex.md#s6; docs/design/openclaw.md#s1-4",
		"no citation here":              "no citation here",
	} {
		got, _ := Rewrite(in)
		require.Equal(t, want, got, in)
	}
	_, n := Rewrite("REFERENCE §1.2, §2 and seed 000 step 2")
	require.Equal(t, 3, n)
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	r := &Resolver{anchors: map[string]map[string]bool{"reference.md": {"s1-3": true}}, docs: map[string]bool{"API.md": true}}
	require.Empty(t, r.Check("see docs/design/reference.md#s1-3 and docs/design/reference.md, docs/API.md"))
	require.Len(t, r.Check("docs/design/reference.md#s9-9"), 1)
	require.Len(t, r.Check("docs/design/nope.md"), 1)
	require.Len(t, r.Check("the Cedar actions of docs/IAM.md"), 1, "a page of docs/ that does not exist")
	for _, stale := range []string{"(design/ARCHITECTURE.md, \"Import rules\")", "pins from shared/design/k8s-testenv-pins",
		"KUBELET-TESTENV.md measured 85 s", "see ARCHITECTURE.md"} {
		require.Len(t, r.Check(stale), 1, stale)
	}
	require.Empty(t, r.Check("CODEX.md §6, an old-form citation Rewrite maps"))
}

// TestLinksInDocsResolve: README.md and docs/*.md link the same pages.
func TestLinksInDocsResolve(t *testing.T) {
	root := moduleRoot(t)
	r, err := NewResolver(root)
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range append(docs, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, err := range r.Check(string(b)) {
			t.Errorf("%s: %v", f, err)
		}
	}
}

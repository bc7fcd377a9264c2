// Package deptest holds the house's walls as a test (in the style of
// tailscale's tstest/deptest): which packages may not depend on which, and
// why. walls_test.go lists the rules; each rule names a witness package
// that does cross its wall, so the test also proves every rule can fail.
//
// Dependencies are the transitive imports of non-test code, as
// `go list -deps` reports them: what a binary links.
package deptest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Module is the module path of the repository.
const Module = "oce.dev/oce"

// Graph maps every package of the module to its transitive dependencies.
type Graph map[string][]string

// Load lists every package of the module with its transitive dependencies
// (one `go list` of the whole module).
func Load() (Graph, error) {
	return list("-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
}

// LoadImports lists every package that the packages matching patterns
// depend on, and those packages, with its direct imports (non-test code).
func LoadImports(patterns ...string) (Graph, error) {
	return list(append([]string{"-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, patterns...)...)
}

// Importers returns the packages among pkg and its dependencies (deps)
// that import dep directly (imports): the edges through which pkg links
// dep.
func Importers(deps, imports Graph, pkg, dep string) []string {
	var out []string
	for _, p := range append([]string{pkg}, deps[pkg]...) {
		for _, i := range imports[p] {
			if i == dep {
				out = append(out, p)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// list runs `go list args` at the module root and reads each line as a
// package followed by the packages it names.
func list(args ...string) (Graph, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("deptest: go list: %v\n%s", err, stderr.String())
	}
	g := Graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g, sc.Err()
}

// Standard reports whether an import path is the standard library's (its
// first element has no dot).
func Standard(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// Match reports whether p matches pattern: an import path, or one ending in
// "/..." for it and everything below it.
func Match(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// MatchAny reports whether p matches any of patterns.
func MatchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if Match(pat, p) {
			return true
		}
	}
	return false
}

// Rule is one wall: packages matching From must not depend on packages
// matching Forbid unless they match Allow.
type Rule struct {
	Name   string
	Why    string
	From   []string
	Forbid []string
	Allow  []string
	// StdOnly limits From to the standard library plus Allow.
	StdOnly bool
	// Crossing is an edge (a From package → a dependency) the rule must
	// refuse: adding it to the graph must make the check fail, which
	// proves the rule can fail.
	Crossing [2]string
}

// Forbidden reports whether rule forbids pkg depending on dep.
func (r Rule) Forbidden(pkg, dep string) bool {
	if dep == pkg || MatchAny(r.Allow, dep) {
		return false
	}
	if r.StdOnly {
		return !Standard(dep)
	}
	return MatchAny(r.Forbid, dep)
}

// Violations returns the forbidden dependencies of pkg under rule.
func (r Rule) Violations(g Graph, pkg string) []string {
	var out []string
	for _, dep := range g[pkg] {
		if r.Forbidden(pkg, dep) {
			out = append(out, dep)
		}
	}
	sort.Strings(out)
	return out
}

// Subjects lists the module's packages the rule applies to.
func (r Rule) Subjects(g Graph) []string {
	var out []string
	for p := range g {
		if MatchAny(r.From, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Pkgs prefixes each relative path with the module path.
func Pkgs(rel ...string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = path.Join(Module, r)
	}
	return out
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("deptest: go.mod not found")
		}
		dir = parent
	}
}

// Command refsrewrite rewrites the seed and reference citations of Go
// comments ("docs/design/reference.md#s1-3", "docs/design/seed-000.md#step-3", "docs/design/codex.md#s6") into
// docs/design links (internal/designref). Without -w it only reports what
// it would change.
//
//	go run ./scripts/refsrewrite        # count per file
//	go run ./scripts/refsrewrite -w     # rewrite in place
package main

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"oce.dev/oce/internal/designref"
)

func main() {
	write := flag.Bool("w", false, "rewrite the files")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		n, err := rewriteComments(p, *write)
		if n > 0 {
			counts[p] = n
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "refsrewrite:", err)
		os.Exit(1)
	}
	files := make([]string, 0, len(counts))
	total := 0
	for f, n := range counts {
		files = append(files, f)
		total += n
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Printf("%4d  %s\n", counts[f], f)
	}
	verb := "would rewrite"
	if *write {
		verb = "rewrote"
	}
	fmt.Printf("%s %d citations in %d files\n", verb, total, len(files))
}

// rewriteComments rewrites the citations inside p's comments only (never
// string literals), keeping everything else byte for byte.
func rewriteComments(p string, write bool) (int, error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
	if err != nil {
		return 0, err
	}
	var out strings.Builder
	last, total := 0, 0
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			start, end := fset.Position(c.Pos()).Offset, fset.Position(c.End()).Offset
			text, n := designref.Rewrite(string(src[start:end]))
			if n == 0 {
				continue
			}
			out.Write(src[last:start])
			out.WriteString(text)
			last, total = end, total+n
		}
	}
	if total == 0 || !write {
		return total, nil
	}
	out.Write(src[last:])
	st, err := os.Stat(p)
	if err != nil {
		return total, err
	}
	return total, os.WriteFile(p, []byte(out.String()), st.Mode().Perm())
}

// Command readwalk measures how far a reader travels between files when
// following one function's call graph inside its package: a depth-first walk
// from the root function that reads each package function once, in the order
// its caller's body names it, and returns to the caller afterwards. It prints
// the number of distinct files visited, the number of file switches, and the
// number of returns to a file the walk had left.
//
//	go run ./scripts/readwalk [-decls] [-v] <package dir> <Func | Type.Method>
//	go run ./scripts/readwalk ./coordinator/compute/kubernetes Driver.PrepareRevision
//
// -decls also counts package-level types, constants and variables the
// walked functions name (as leaves the reader looks up).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	decls := flag.Bool("decls", false, "count named package-level types, constants and variables too")
	verbose := flag.Bool("v", false, "print the walk")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: readwalk [-decls] [-v] <package dir> <Func | Type.Method>")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *decls, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "readwalk:", err)
		os.Exit(1)
	}
}

func goList(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	return out, nil
}

func run(dir, root string, decls, verbose bool, w io.Writer) error {
	out, err := goList(dir, "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	if err != nil {
		return err
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok {
			exports[path] = file
		}
	}
	out, err = goList(dir, "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", ".")
	if err != nil {
		return err
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(f) != 3 {
		return fmt.Errorf("unexpected go list output %q", out)
	}
	pkgPath, pkgDir := f[0], f[1]
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range strings.Fields(f[2]) {
		af, err := parser.ParseFile(fset, filepath.Join(pkgDir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, af)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(pkgPath, fset, files, info)
	if err != nil {
		return err
	}

	bodies := map[types.Object]*ast.FuncDecl{}
	var start types.Object
	for _, af := range files {
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			obj := info.Defs[fd.Name]
			bodies[obj] = fd
			if declName(fd) == root {
				start = obj
			}
		}
	}
	if start == nil {
		return fmt.Errorf("%s declares no %s", pkgPath, root)
	}

	fileOf := func(o types.Object) string { return filepath.Base(fset.Position(o.Pos()).Filename) }
	var seq []string
	seen := map[types.Object]bool{}
	depth := 0
	emit := func(o types.Object) {
		seq = append(seq, fileOf(o))
		if verbose {
			fmt.Fprintf(w, "%s%s  %s\n", strings.Repeat("  ", depth), o.Name(), fileOf(o))
		}
	}
	var walk func(o types.Object)
	walk = func(o types.Object) {
		seen[o] = true
		emit(o)
		fd := bodies[o]
		if fd == nil || fd.Body == nil {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			u := info.Uses[id]
			if u == nil || u.Pkg() != pkg || u.Parent() != nil && u.Parent() != pkg.Scope() {
				return true // not a package-level name of this package (locals, fields, imports)
			}
			switch x := u.(type) {
			case *types.Func:
				u = x.Origin() // a generic function's instances read as one
			case *types.TypeName, *types.Const, *types.Var:
				if !decls || u.Parent() != pkg.Scope() { // struct fields have no scope
					return true
				}
			default:
				return true
			}
			if seen[u] {
				return true
			}
			depth++
			walk(u)
			depth--
			emit(o) // back in the caller
			return true
		})
	}
	walk(start)

	visited := map[string]bool{}
	switches, returns := 0, 0
	for i, file := range seq {
		if i > 0 && file != seq[i-1] {
			switches++
			if visited[file] {
				returns++
			}
		}
		visited[file] = true
	}
	fmt.Fprintf(w, "%s: %d functions read, %d files visited, %d file switches, %d returns to a file left before\n",
		root, countFuncs(seen), len(visited), switches, returns)
	return nil
}

func countFuncs(seen map[types.Object]bool) int {
	n := 0
	for o := range seen {
		if _, ok := o.(*types.Func); ok {
			n++
		}
	}
	return n
}

// declName is "Name" for a function and "Type.Name" for a method.
func declName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

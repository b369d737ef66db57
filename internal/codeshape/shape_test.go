// Package codeshape holds tests of the code's shape that issue #11 asked
// to keep: short functions and files, one-way imports, no environment
// switches in library code. They read the source, so they fail when a
// change breaks a rule rather than when someone remembers to look.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	maxFileLines = 600
	maxFuncLines = 100
	module       = "github.com/rtmon/rtmon/"
)

// sourceFile is one production Go file of the repository.
type sourceFile struct {
	rel   string // path from the repository root
	pkg   string // directory from the root: the package's import path below module
	file  *ast.File
	lines int
}

func productionFiles(t *testing.T) ([]sourceFile, *token.FileSet) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []sourceFile
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, sourceFile{rel: rel, pkg: filepath.ToSlash(filepath.Dir(rel)), file: f,
			lines: strings.Count(string(src), "\n")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("only %d production files found from %s", len(out), root)
	}
	return out, fset
}

func TestFilesAndFunctionsAreShort(t *testing.T) {
	files, fset := productionFiles(t)
	for _, f := range files {
		if f.lines > maxFileLines {
			t.Errorf("%s: %d lines, more than %d", f.rel, f.lines, maxFileLines)
		}
		for _, d := range f.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: func %s is %d lines, more than %d", f.rel, fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}

// Data flows one way: capture -> reconstruct -> pageview -> store/export/
// whatif -> web/stitch -> pipeline (which wires them all, the live view
// included) -> cmd. A package may import only packages before it, web
// reads the store through store/query alone, and no package reaches into
// another's internal packages.
func TestImportsFlowOneWay(t *testing.T) {
	layer := map[string]int{"capture": 1, "reconstruct": 2, "pageview": 3,
		"store": 4, "export": 4, "whatif": 4, "web": 5, "stitch": 5, "pipeline": 6, "cmd": 7}
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	files, _ := productionFiles(t)
	for _, f := range files {
		from, ok := layer[top(f.pkg)]
		if !ok {
			continue // synth, testbed, bench and internal serve tests and tools
		}
		for _, im := range f.file.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			dep, ok := strings.CutPrefix(path, module)
			if !ok {
				continue
			}
			to, known := layer[top(dep)]
			switch {
			case known && to > from:
				t.Errorf("%s imports %s: a later stage of the pipeline", f.rel, dep)
			case top(f.pkg) == "web" && top(dep) == "store" && dep != "store/query":
				t.Errorf("%s imports %s: web reads the store through store/query only", f.rel, dep)
			case strings.Contains(dep, "/internal/") && !strings.HasPrefix(f.pkg, strings.Split(dep, "/internal/")[0]):
				t.Errorf("%s imports %s: another package's internals", f.rel, dep)
			}
		}
	}
}

// Library packages take their settings from their options, never from
// the environment: only the command reads variables, and says which in
// its help. (os.Environ passes the environment on to a child process,
// which is no switch.)
func TestNoEnvironmentSwitchesInLibraries(t *testing.T) {
	files, fset := productionFiles(t)
	for _, f := range files {
		if strings.HasPrefix(f.pkg, "cmd/") || top(f.pkg) == "testbed" {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") {
				t.Errorf("%s: os.%s in a library package", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

func top(p string) string { return strings.SplitN(p, "/", 2)[0] }

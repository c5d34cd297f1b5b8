// Command apicount prints how many identifiers each released module of this
// repository exports, so that the size of the public API is a number a
// review can compare.
//
// It counts, in every non-internal package of a module (the module's own
// directory tree minus nested modules, testdata, _test.go files and paths
// with an "internal" element):
//
//   - exported top-level funcs, types, vars and consts;
//   - exported methods of exported types (value or pointer receiver);
//   - exported fields of exported struct types, and exported methods of
//     exported interface types (embedded types count as one field or method).
//
// Run from the repository root: go run ./internal/apicount
// (the released modules are read from scripts/modules.txt, rows "tag DIR").
// With -v it also prints the count of each package.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print the count of each package too")
	flag.Parse()
	mods, err := released("scripts/modules.txt")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
	total := 0
	for _, m := range mods {
		pkgs, err := countModule(m, mods)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apicount:", err)
			os.Exit(1)
		}
		n := 0
		dirs := make([]string, 0, len(pkgs))
		for d, c := range pkgs {
			n += c
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		fmt.Printf("%-20s %4d\n", m, n)
		if *verbose {
			for _, d := range dirs {
				fmt.Printf("  %-30s %4d\n", d, pkgs[d])
			}
		}
		total += n
	}
	fmt.Printf("%-20s %4d\n", "total", total)
}

// released reads the directories of the tagged modules from modules.txt.
func released(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mods []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "tag" {
			mods = append(mods, filepath.Clean(fields[1]))
		}
	}
	return mods, sc.Err()
}

// countModule returns the exported identifiers of each package of the module
// in dir, keyed by package directory.
func countModule(dir string, mods []string) (map[string]int, error) {
	counts := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir {
			base := d.Name()
			if base == "testdata" || base == "internal" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module counts on its own, or not at all
			}
		}
		n, err := countPackage(path)
		if err != nil {
			return err
		}
		if n >= 0 {
			counts[path] = n
		}
		return nil
	})
	return counts, err
}

// countPackage counts the exported identifiers of the non-test Go files in
// dir; it returns -1 when dir holds no such file.
func countPackage(dir string) (int, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		if f.Name.Name == "main" {
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return -1, nil
	}
	// Build-tagged variants of one file (x_linux.go, x_other.go) declare
	// the same names: count each name once.
	seen := map[string]bool{}
	add := func(key string) {
		seen[key] = true
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add("func " + d.Name.Name)
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					add("method " + recv + "." + d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add("value " + n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						add("type " + s.Name.Name)
						members(s.Name.Name, s.Type, add)
					}
				}
			}
		}
	}
	return len(seen), nil
}

// members adds the exported fields of a struct type and the exported
// methods of an interface type.
func members(typ string, expr ast.Expr, add func(string)) {
	var list *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return
	}
	for _, f := range list.List {
		if len(f.Names) == 0 { // embedded
			if name := recvName(f.Type); ast.IsExported(name) {
				add("member " + typ + "." + name)
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				add("member " + typ + "." + n.Name)
			}
		}
	}
}

// recvName returns the type name of a receiver or embedded field expression
// (T, *T, T[P], pkg.T).
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

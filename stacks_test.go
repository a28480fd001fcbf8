package quicbench_test

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/peers"
)

// TestStackNamesStayInTheirFolders fails when the code of a package names
// a particular stack of the registry outside the stack's own folder
// (peers/NAME), the packages its description lists (Chromium's driver,
// package browser), the folders of the stacks built on it (Lighthouse's
// drives Chromium) and the registry itself (package peers, peers/all).
// Everything else asks the registry: adding a stack is one folder, its
// tests and its install lines (docs/architecture.md, "Adding a stack").
//
// It reads the identifiers and string literals of every non-test Go file
// of the module (comments may name stacks: they explain, they do not
// depend) and looks for each stack's name in them, ignoring case:
// ClientChromium, caddyPaths and "firefox" all name a stack. quicbench's
// own stack is the default and is named by package model.
func TestStackNamesStayInTheirFolders(t *testing.T) {
	type rule struct {
		name    string
		allowed []string // module-relative folders
	}
	var rules []rule
	for _, s := range peers.All() {
		if s.Name == peers.Own {
			continue
		}
		allowed := append([]string{"peers/" + s.Name}, s.Packages...)
		for _, o := range peers.All() {
			if slices.Contains(o.Uses, s.Name) {
				allowed = append(allowed, "peers/"+o.Name)
				allowed = append(allowed, o.Packages...)
			}
		}
		rules = append(rules, rule{s.Name, allowed})
	}
	if len(rules) < 5 {
		t.Fatalf("%d stacks besides quicbench's own: is the registry empty?", len(rules))
	}
	inFolder := func(dir string, folders []string) bool {
		return slices.ContainsFunc(folders, func(f string) bool { return dir == f || strings.HasPrefix(dir, f+"/") })
	}
	files := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "target") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "peers" || dir == "peers/all" {
			return nil // the registry
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		fset := token.NewFileSet()
		var sc scanner.Scanner
		sc.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			pos, tok, lit := sc.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.IDENT && tok != token.STRING {
				continue
			}
			low := strings.ToLower(lit)
			for _, r := range rules {
				if strings.Contains(low, r.name) && !inFolder(dir, r.allowed) {
					t.Errorf("%s: %s names stack %s outside its folders (%s): ask the registry (package peers) instead",
						fset.Position(pos), lit, r.name, strings.Join(r.allowed, ", "))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files: is the test running at the module root?", files)
	}
}

// TestSkipsGoThroughTheRule fails when a test skips by itself instead of
// through internal/testsupport (Unavailable, RequireRoot...), which turns
// the skip into a failure under QUICBENCH_REQUIRE_ALL (CI): a test whose
// prerequisite is missing on CI's machine must fail, never pass unseen. A
// skip is allowed only in a branch on testing.Short() (the user asked for
// the short suite), or on an environment variable or saying "helper
// process" (a re-executed helper process's entry, which is no test).
func TestSkipsGoThroughTheRule(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "target") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "internal/testsupport") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		var conds []ast.Expr
		var walk func(n ast.Node) bool
		walk = func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.IfStmt:
				conds = append(conds, x.Cond)
				ast.Inspect(x.Body, walk)
				conds = conds[:len(conds)-1]
				if x.Else != nil {
					ast.Inspect(x.Else, walk)
				}
				return false
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Skip" && sel.Sel.Name != "Skipf" && sel.Sel.Name != "SkipNow") {
					return true
				}
				if len(x.Args) > 0 {
					if lit, ok := x.Args[0].(*ast.BasicLit); ok && strings.Contains(lit.Value, "helper process") {
						return true
					}
				}
				for _, c := range conds {
					var src strings.Builder
					_ = printer.Fprint(&src, fset, c)
					if s := src.String(); strings.Contains(s, "testing.Short()") || strings.Contains(s, "Getenv") {
						return true
					}
				}
				bad = append(bad, fset.Position(x.Pos()).String())
			}
			return true
		}
		ast.Inspect(f, walk)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: a skip outside testsupport's rule: call testsupport.Unavailable (or RequireRoot) instead", b)
	}
}

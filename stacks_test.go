package quicbench_test

import (
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

package quicbench_test

import (
	"bufio"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layer is one floor of the house: the packages whose import path (relative
// to the module) is one of prefixes or starts with a prefix and "/", and the
// layers they may import besides their own. docs/architecture.md ("Layers")
// shows the same table.
type layer struct {
	name     string
	prefixes []string
	imports  []string // other layers this one may import
	stdOnly  bool     // only the standard library outside the module
}

// layers lists the layers from the ground floor up. A package belongs to
// the layer with its longest matching prefix; a package in no layer fails
// the test, so that a new top-level package is placed (and documented) on
// purpose.
var layers = []layer{
	{name: "emulator", prefixes: []string{"emu"}, stdOnly: true},
	{name: "vocabulary", prefixes: []string{"model"}, imports: []string{"emulator"}, stdOnly: true},
	// the registry of stacks: descriptions only, so every layer above
	// may ask it (the stacks' code lives in its subfolders, "peers/")
	{name: "registry", prefixes: []string{"peers"}, imports: []string{"vocabulary"}},
	{name: "plumbing", prefixes: []string{"internal", "tun"}, imports: []string{"registry", "vocabulary", "emulator"}},
	{name: "testbed", prefixes: []string{"forward", "netns"}, imports: []string{"plumbing", "registry", "vocabulary", "emulator"}},
	{name: "endpoints", prefixes: []string{"endpoint", "browser", "firefox", "lighthouse"}, imports: []string{"plumbing", "registry", "vocabulary"}},
	{name: "plans and results", prefixes: []string{"plan", "store", "stats", "competing"}, imports: []string{"plumbing", "registry", "vocabulary", "emulator"}},
	// "peers/": every stack's code, a folder per stack (a prefix ending
	// in "/" takes the subfolders only)
	{name: "measurement", prefixes: []string{"workload", "calibrate", "traffic", "capture", "peers/"},
		imports: []string{"plans and results", "endpoints", "testbed", "plumbing", "registry", "vocabulary", "emulator"}},
	{name: "report", prefixes: []string{"report"}, imports: []string{"plans and results", "registry", "vocabulary"}},
	{name: "checks", prefixes: []string{"parcheck", "faulttrial"}, imports: []string{"plans and results", "registry", "vocabulary"}},
	{name: "runner", prefixes: []string{"runner"},
		imports: []string{"measurement", "plans and results", "endpoints", "testbed", "plumbing", "registry", "vocabulary", "emulator"}},
	{name: "cluster jobs", prefixes: []string{"cluster"}},
	{name: "cli", prefixes: []string{"cli"},
		imports: []string{"cluster jobs", "runner", "report", "checks", "measurement", "plans and results", "endpoints", "testbed", "plumbing", "registry", "vocabulary", "emulator"}},
	{name: "cmd", prefixes: []string{"cmd"}, imports: []string{"cli"}},
}

// testOnly are packages that only test files (and each other) may import.
var testOnly = []string{"internal/testsupport", "endpoint/peertest", "cli/clitest"}

// layerOf returns the layer of the module-relative package path rel.
func layerOf(rel string) (layer, bool) {
	var best layer
	bestLen := -1
	for _, l := range layers {
		for _, p := range l.prefixes {
			sub := strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p)
			if (sub || rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > bestLen {
				best, bestLen = l, len(p)
			}
		}
	}
	return best, bestLen >= 0
}

// TestLayers fails when a package imports a layer above its own or beside
// it that its layer may not import (the runner the report, say), when a
// package of the two ground floors imports anything outside the module but
// the standard library, when a non-test file imports a test-only package, and
// when a package is in no layer. It reads the imports of every non-test Go
// file of the module, whatever its build constraints.
func TestLayers(t *testing.T) {
	module := modulePath(t)
	pkgs := moduleImports(t)
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages: is the test running at the module root?", len(pkgs))
	}
	for _, rel := range slices.Sorted(maps.Keys(pkgs)) {
		imports := pkgs[rel]
		l, ok := layerOf(rel)
		if !ok {
			t.Errorf("package %s is in no layer: add it to layers in layers_test.go and to docs/architecture.md", rel)
			continue
		}
		for _, imp := range slices.Sorted(maps.Keys(imports)) {
			file := imports[imp]
			inner, inModule := strings.CutPrefix(imp, module+"/")
			if !inModule {
				if l.stdOnly && !isStd(imp) {
					t.Errorf("%s: %s (layer %s) imports %s: that layer uses the standard library only", file, rel, l.name, imp)
				}
				continue
			}
			if slices.Contains(testOnly, inner) && !slices.Contains(testOnly, rel) {
				t.Errorf("%s: %s imports %s, which is for tests only", file, rel, inner)
			}
			il, ok := layerOf(inner)
			if !ok || il.name == l.name {
				continue // a package in no layer is reported above
			}
			if !slices.Contains(l.imports, il.name) {
				t.Errorf("%s: %s (layer %s) imports %s (layer %s); %s may import only %s",
					file, rel, l.name, inner, il.name, l.name, describe(l.imports))
			}
		}
	}
}

// TestLayerTable checks the table itself: names unique, every allowed
// import a layer listed below the one allowing it, so that the layers are
// acyclic and read from the ground floor up.
func TestLayerTable(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range layers {
		if seen[l.name] {
			t.Errorf("layer %s listed twice", l.name)
		}
		for _, imp := range l.imports {
			if !seen[imp] {
				t.Errorf("layer %s may import %s, which is not listed below it", l.name, imp)
			}
		}
		seen[l.name] = true
	}
}

func describe(names []string) string {
	if len(names) == 0 {
		return "its own layer"
	}
	return strings.Join(names, ", ")
}

// isStd reports whether an import path is the standard library's: its first
// element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// modulePath reads the module path from go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

// moduleImports returns, for every package directory of the module (as a
// module-relative path), the paths its non-test files import, each with
// one file that imports it. Like the go command it skips testdata and
// directories whose name starts with "." or "_", and nested modules.
func moduleImports(t *testing.T) map[string]map[string]string {
	t.Helper()
	pkgs := map[string]map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				} else if !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(filepath.Dir(path))
		if pkgs[rel] == nil {
			pkgs[rel] = map[string]string{}
		}
		for _, is := range f.Imports {
			imp, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if _, ok := pkgs[rel][imp]; !ok {
				pkgs[rel][imp] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

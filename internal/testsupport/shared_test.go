package testsupport

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRootHoldsTheModule(t *testing.T) {
	root := RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "module github.com/quicbench/quicbench\n"; len(b) < len(want) || string(b[:len(want)]) != want {
		t.Fatalf("%s/go.mod is not quicbench's: %q", root, b[:min(len(b), 60)])
	}
}

// skippedRun runs fn as a subtest named name, with RequireEnv unset, and
// reports whether the subtest was skipped.
func skippedRun(t *testing.T, name string, fn func(t *testing.T)) bool {
	t.Helper()
	t.Setenv(RequireEnv, "")
	var sub *testing.T
	t.Run(name, func(t *testing.T) {
		sub = t
		fn(t)
	})
	return sub.Skipped()
}

func TestUnavailableSkipsWithoutRequire(t *testing.T) {
	if !skippedRun(t, "prerequisite", func(t *testing.T) {
		Unavailable(t, "nothing here")
		t.Error("Unavailable returned")
	}) {
		t.Fatal("the subtest was not skipped")
	}
}

func TestRequireRootSkipsOnlyOrdinaryUsers(t *testing.T) {
	skipped := skippedRun(t, "root", func(t *testing.T) { RequireRoot(t, "needs root") })
	if root := os.Geteuid() == 0; skipped == root {
		t.Fatalf("running as root: %v; skipped: %v", root, skipped)
	}
}

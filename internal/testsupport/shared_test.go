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

func TestUnavailableSkipsWithoutRequire(t *testing.T) {
	t.Setenv(RequireEnv, "")
	var sub *testing.T
	t.Run("prerequisite", func(t *testing.T) {
		sub = t
		Unavailable(t, "nothing here")
		t.Error("Unavailable returned")
	})
	if !sub.Skipped() {
		t.Fatal("the subtest was not skipped")
	}
}

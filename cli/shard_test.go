package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// Bad --shard values are usage errors (exit 2) that name the value, before
// anything else is checked, and create no database.
func TestRunRejectsBadShard(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"0/4", "5/4", "1/0", "abc", "1/2/3", "1/5000", "-1/2"} {
		db := filepath.Join(dir, "x.db")
		code, _, stderr := runCLI(t, "run", "--plan", "quick", "--shard", v, "-o", db)
		if code != ExitUsage || !strings.Contains(stderr, "--shard") {
			t.Errorf("--shard %s: exit %d, want %d; stderr:\n%s", v, code, ExitUsage, stderr)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("--shard %s created a database", v)
		}
	}
}

// A plan with a precision target cannot be sharded.
func TestRunRejectsAdaptiveShard(t *testing.T) {
	testsupport.RequireRoot(t, "quicbench run checks for root first")
	db := filepath.Join(t.TempDir(), "x.db")
	code, _, stderr := runCLI(t, "run", "--plan", "quick", "--shard", "1/4", "--precision", "5%", "-o", db)
	if code != ExitUsage || !strings.Contains(stderr, "precision") {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
	}
}

func TestMergeUsage(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "all.db")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", "-o", filepath.Join(dir, "o.db")}, "shards' databases"},
		{[]string{"merge", "a.db", "b.db"}, "-o ALL.db"},
		{[]string{"merge", "a.db", "-o", existing}, "already exists"},
		{[]string{"merge", "a.db", "-o", "a.db"}, "both an input and the output"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d with %q; stderr:\n%s", c.args, code, ExitUsage, c.want, stderr)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Error("merge overwrote an existing file")
	}
	// Not a database: an error naming the file, no output.
	notDB := filepath.Join(dir, "x.db")
	if err := os.WriteFile(notDB, []byte("not sqlite at all, not at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.db")
	code, _, stderr := runCLI(t, "merge", notDB, "-o", out)
	if code == ExitOK || !strings.Contains(stderr, notDB) {
		t.Errorf("merging a non-database: exit %d; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused merge left its output")
	}
}

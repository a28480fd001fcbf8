package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/plan"
)

// Bad input fails before anything runs: usage exit status, a message
// naming the problem, no directory created.
func TestCheckParallelBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--parallel", "0"}, "--parallel 0: want 2.."},
		{[]string{"--parallel", "1"}, "1 would compare two serial runs"},
		{[]string{"--parallel", "-3"}, "--parallel -3"},
		{[]string{"--plan", "no-such-plan"}, `plan "no-such-plan" is neither a built-in plan`},
		{[]string{"--plan", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"--iterations", "1"}, "--iterations 1: want 2.."},
		{[]string{"extra"}, "check-parallel takes no arguments, got 1"},
	} {
		out := filepath.Join(dir, "out")
		args := append([]string{"check-parallel", "-o", out}, c.args...)
		code, stdout, stderr := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d naming %q", c.args, code, stdout, stderr, ExitUsage, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%q: the output directory was created", c.args)
		}
	}
}

// A database left in the directory is not overwritten without --resume.
func TestCheckParallelRefusesExistingRun(t *testing.T) {
	requireRootCLI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkSerialDB), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "check-parallel", "-o", dir)
	if code != ExitUsage || !strings.Contains(stderr, "serial.db already exists") || !strings.Contains(stderr, "--resume") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// --iterations gives every cell the same count, also the tests that set
// their own.
func TestWithIterations(t *testing.T) {
	p, err := plan.Builtin("quick")
	if err != nil {
		t.Fatal(err)
	}
	q, err := withIterations(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := q.Expand()
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := p.Expand()
	if len(cells) != len(orig) || q.Name != p.Name || q.Seed != p.Seed {
		t.Fatalf("%d cells (was %d), name %q, seed %d", len(cells), len(orig), q.Name, q.Seed)
	}
	for _, c := range cells {
		if c.Iterations != 3 {
			t.Errorf("%s: %d iterations", c.Key, c.Iterations)
		}
	}
}

const tinyCheckPlan = `name: tiny-check
seed: 7
iterations: 4
warmup: false
protocols: [h2, h3]
client: builtin
timeout: 20s
scenarios:
  - name: slow
    link: "rate 10mbit delay 5ms"
tests:
  - test: page
    params: {objects: 5, size: 4KB}
`

// The whole command on a tiny plan: both runs are taken, the comparison
// printed and written; 4 pairs are too few for a verdict, which the exit
// status and the message say. A second invocation with --resume reuses
// both complete runs and prints JSON.
func TestCheckParallelTiny(t *testing.T) {
	requireRootCLI(t)
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	t.Setenv(cliExecEnv, "main") // the runner's server and agent are this binary
	before := qbNamespaces()
	dir := t.TempDir()
	planFile := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(planFile, []byte(tinyCheckPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "check")
	code, stdout, stderr := tbCLI(context.Background(), "check-parallel", "--plan", planFile, "--parallel", "2", "-o", out, "-q")
	if code != ExitFailure || !strings.Contains(stderr, "too few pairs: 2 of 2 cells have fewer than 6 valid pairs") {
		t.Fatalf("exit %d; want %d and too few pairs\nstdout:\n%s\nstderr:\n%s", code, ExitFailure, stdout, stderr)
	}
	for _, f := range []string{checkSerialDB, checkParallelDB, checkText} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if f := strings.Fields(lines[0]); len(f) < 3 || f[0] != "CELL" || f[1] != "PAIRS" || f[len(f)-1] != "VERDICT" {
		t.Fatalf("header %q:\n%s", lines[0], stdout)
	}
	for i, proto := range []string{"h2", "h3"} {
		row := lines[1+i]
		if !strings.HasPrefix(row, "slow/page/objects=5,size=4KB,connection=cold/"+proto+"/") || !strings.HasSuffix(row, "too few pairs") || !strings.Contains(row, " ms") {
			t.Errorf("row %q", row)
		}
		if f := strings.Fields(row); f[1] != "4" {
			t.Errorf("row %q: want 4 pairs", row)
		}
	}
	if !strings.Contains(stdout, "\nverdict: too few pairs") || !strings.Contains(stdout, "comparison written to "+filepath.Join(out, checkText)) {
		t.Errorf("stdout:\n%s", stdout)
	}
	md, _ := os.ReadFile(filepath.Join(out, checkText))
	if !strings.Contains(string(md), "# Does parallel change the answer?") || !strings.Contains(string(md), "| `slow/page/objects=5,size=4KB,connection=cold/h3/builtin/cubic` | 4 |") {
		t.Errorf("check.txt:\n%s", md)
	}

	code, stdout, stderr = tbCLI(context.Background(), "check-parallel", "--plan", planFile, "--parallel", "2", "-o", out, "--resume", "--json")
	if code != ExitFailure || strings.Count(stderr, "reusing the complete") != 2 {
		t.Fatalf("resume: exit %d\nstderr:\n%s", code, stderr)
	}
	var j struct {
		Verdict string `json:"verdict"`
		Cells   []struct {
			Key     string   `json:"key"`
			Pairs   int      `json:"pairs"`
			Serial  *float64 `json:"serial_median"`
			Verdict string   `json:"verdict"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout)
	}
	if j.Verdict != "too few pairs" || len(j.Cells) != 2 || j.Cells[0].Pairs != 4 || j.Cells[0].Serial == nil || *j.Cells[0].Serial <= 0 {
		t.Errorf("JSON:\n%s", stdout)
	}
	// Resuming with another plan (here: other iterations) is refused.
	code, _, stderr = tbCLI(context.Background(), "check-parallel", "--plan", planFile, "--iterations", "5", "-o", out, "--resume")
	if code != ExitUsage || !strings.Contains(stderr, "holds a run of another plan") {
		t.Errorf("resume with other iterations: exit %d, stderr %q", code, stderr)
	}
	for ns := range qbNamespaces() {
		if !before[ns] {
			t.Errorf("namespace %s left behind", ns)
		}
	}
}

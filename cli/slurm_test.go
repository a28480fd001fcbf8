package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cluster"
	"github.com/quicbench/quicbench/plan"
)

// runCLIExe is runCLI with the executable path set, as main sets it.
func runCLIExe(t *testing.T, exe string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Args: args, Getenv: func(string) string { return "" }, Exe: exe}
	code = Run(context.Background(), env)
	return code, out.String(), errb.String()
}

func TestSlurmWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my runs")
	code, out, errs := runCLIExe(t, "/opt/qb/quicbench", "slurm", "--plan", "quick", "--shards", "4", "-o", dir, "--parallel", "2", "--", "--partition=main", "--time", "1:00:00")
	if code != ExitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if !strings.Contains(errs, "submit with: bash '"+dir+"/submit.sh'") {
		t.Errorf("stderr %q lacks the submit hint", errs)
	}
	arr, err := os.ReadFile(filepath.Join(dir, cluster.ArrayScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#SBATCH --array=1-4\n", "#SBATCH --partition=main\n", "#SBATCH --time 1:00:00\n", "qb=/opt/qb/quicbench\n", "--parallel 2"} {
		if !strings.Contains(string(arr), want) {
			t.Errorf("array.sh lacks %q:\n%s", want, arr)
		}
	}
	plan, err := os.ReadFile(filepath.Join(dir, cluster.PlanFile))
	if err != nil || !strings.Contains(string(plan), "name: quick") {
		t.Errorf("plan.yaml: %v %q", err, plan)
	}
}

func TestSlurmInputErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"slurm", "--shards", "2"}, ExitUsage, "no plan"},
		{[]string{"slurm", "--plan", "quick"}, ExitUsage, "--shards 0"},
		{[]string{"slurm", "--plan", "quick", "--shards", "-3"}, ExitUsage, "--shards -3"},
		{[]string{"slurm", "--plan", "no-such-plan", "--shards", "2"}, ExitUsage, "neither a built-in plan"},
		{[]string{"slurm", "--plan", "quick", "--shards", "2", "stray"}, ExitUsage, "unexpected argument"},
		{[]string{"slurm", "--plan", "quick", "--shards", "2", "--", "main"}, ExitUsage, "not an option"},
		{[]string{"slurm", "--plan", "quick", "--shards", "2", "-o", filepath.Join(file, "sub")}, ExitEnv, "writing the Slurm jobs"},
	} {
		code, _, errs := runCLIExe(t, "/q", c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d with %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestShardsChecked: a plan with a precision target cannot be sharded
// (both commands refuse it), and shards left without a block are named.
func TestShardsChecked(t *testing.T) {
	dir := t.TempDir()
	adaptive := filepath.Join(dir, "adaptive.yaml")
	if err := os.WriteFile(adaptive, []byte("name: adaptive\nprecision: 5%\nprotocols: [h1, h3]\nscenarios:\n  - name: clean\ntests:\n  - test: ttfb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"slurm", "--plan", adaptive, "--shards", "2", "-o", filepath.Join(dir, "out")},
		{"k8s", "--plan", adaptive, "--shards", "2", "--image", "qb"},
	} {
		if code, _, errs := runCLIExe(t, "/q", args...); code != ExitUsage || !strings.Contains(errs, "cannot be sharded") {
			t.Errorf("%s: exit %d, %q; want a usage error saying it cannot be sharded", args[0], code, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("slurm wrote its directory for a plan it refused")
	}
	p, err := plan.Builtin("quick")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := p.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	n := len(blocks) + 7
	code, _, errs := runCLIExe(t, "/q", "slurm", "--plan", "quick", "--shards", strconv.Itoa(n), "-o", filepath.Join(dir, "many"))
	if want := fmt.Sprintf("7 of %d shards get no block", n); code != ExitOK || !strings.Contains(errs, want) {
		t.Errorf("%d shards of quick's %d blocks: exit %d, %q; want %q", n, len(blocks), code, errs, want)
	}
}

// TestSlurmSubmit submits through a fake sbatch that records its arguments.
func TestSlurmSubmit(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho \"$*\" >> '" + log + "'\nn=$(wc -l < '" + log + "')\necho \"$((100 + n));cluster\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	code, out, errs := runCLIExe(t, "/q", "slurm", "--plan", "quick", "--shards", "3", "-o", dir, "--submit", "--partial")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out != "array job 101\nmerge job 102\n" {
		t.Errorf("stdout %q", out)
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "--parsable " + dir + "/array.sh\n--parsable --dependency=afterany:101 " + dir + "/merge.sh\n"
	if string(calls) != want {
		t.Errorf("sbatch calls\n%s\nwant\n%s", calls, want)
	}
}

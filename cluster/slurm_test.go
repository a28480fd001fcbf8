package cluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// fakeQuicbench writes a script that prints its arguments one per line,
// bracketed, so that a test sees exactly how the job script quoted them.
func fakeQuicbench(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fake quicbench")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSlurmArrayScript(t *testing.T) {
	s := Slurm{Plan: "quick", Shards: 4, Dir: "/shared/my runs/q", Quicbench: "/opt/q b/quicbench", Parallel: 3,
		Sbatch: []string{"-p", "main", "--time=2:00:00", "--comment=two words"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := s.ArrayScript()
	for _, want := range []string{
		"#!/bin/bash\n",
		"#SBATCH --job-name=qb-quick\n",
		"#SBATCH --array=1-4\n",
		"#SBATCH --requeue\n",
		"#SBATCH --output=\"/shared/my runs/q/shard-%a.log\"\n",
		"#SBATCH -p main\n",
		"#SBATCH --time=2:00:00\n",
		"#SBATCH --comment=\"two words\"\n",
		"qb='/opt/q b/quicbench'\n",
		"dir='/shared/my runs/q'\n",
		"n=4\n",
		`run --resume "$db" --no-report --lines --parallel 3`,
		`run --plan "$dir/plan.yaml" --shard "$k/$n" -o "$db" --no-report --lines --parallel 3`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("array script lacks %q:\n%s", want, got)
		}
	}
	// sbatch stops reading #SBATCH lines at the first command.
	lastSbatch := strings.LastIndex(got, "#SBATCH")
	if first := strings.Index(got, "set -euo"); first < lastSbatch {
		t.Errorf("#SBATCH line after the first command:\n%s", got)
	}
}

// TestSlurmScriptsRun runs the generated scripts with bash and a fake
// quicbench in a directory with blanks and quotes in its name: a fresh
// shard runs the plan, an existing one resumes, the merge names every
// shard.
func TestSlurmScriptsRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		testsupport.Unavailable(t, "no bash")
	}
	dir := filepath.Join(t.TempDir(), "it's a dir")
	s := Slurm{Plan: "p", Shards: 3, Dir: dir, Quicbench: fakeQuicbench(t, t.TempDir())}
	if err := s.Write([]byte("name: p\n")); err != nil {
		t.Fatal(err)
	}
	run := func(script string, env ...string) string {
		t.Helper()
		c := exec.Command("bash", filepath.Join(dir, script))
		c.Env = append(os.Environ(), env...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	out := run(ArrayScriptFile, "SLURM_ARRAY_TASK_ID=2")
	want := "[run]\n[--plan]\n[" + dir + "/plan.yaml]\n[--shard]\n[2/3]\n[-o]\n[" + dir + "/shard-2.db]\n[--no-report]\n[--lines]\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("fresh shard ran\n%s\nwant the arguments\n%s", out, want)
	}
	// A run that ended well marks its shard done; a requeued task finding
	// the database but no mark resumes it; one finding the mark does nothing.
	if err := os.Remove(filepath.Join(dir, "shard-2.done")); err != nil {
		t.Fatalf("a shard that ended well is not marked done: %v", err)
	}
	if err := os.WriteFile(s.ShardDB(2), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(ArrayScriptFile, "SLURM_ARRAY_TASK_ID=2")
	want = "resuming " + dir + "/shard-2.db\n[run]\n[--resume]\n[" + dir + "/shard-2.db]\n[--no-report]\n[--lines]\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("existing shard ran\n%s\nwant the arguments\n%s", out, want)
	}
	if out = run(ArrayScriptFile, "SLURM_ARRAY_TASK_ID=2"); !strings.Contains(out, "shard 2 is complete") || strings.Contains(out, "[run]") {
		t.Errorf("a shard marked done ran\n%s", out)
	}
	c := exec.Command("bash", filepath.Join(dir, ArrayScriptFile))
	c.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID=")
	if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "Slurm array task") {
		t.Errorf("outside Slurm: %v, %s; want a failure naming the array task", err, out)
	}
	out = run(MergeScriptFile)
	want = "[merge]\n[" + dir + "/shard-1.db]\n[" + dir + "/shard-2.db]\n[" + dir + "/shard-3.db]\n[-o]\n[" + dir + "/all.db]\n"
	if out != want {
		t.Errorf("merge ran\n%s\nwant\n%s", out, want)
	}

	// --partial: only the shards that exist, and --partial.
	s.Partial = true
	if err := s.Write([]byte("name: p\n")); err != nil {
		t.Fatal(err)
	}
	out = run(MergeScriptFile)
	want = "[merge]\n[" + dir + "/shard-2.db]\n[-o]\n[" + dir + "/all.db]\n[--partial]\n"
	if !strings.HasSuffix(out, want) || !strings.Contains(out, "shard 1: no database") {
		t.Errorf("partial merge ran\n%s\nwant it to end with\n%s", out, want)
	}
	if got := s.Dependency("42"); got != "afterany:42" {
		t.Errorf("partial dependency %q", got)
	}
	s.Partial = false
	if got := s.Dependency("42"); got != "afterok:42" {
		t.Errorf("dependency %q", got)
	}

	// Another plan in a directory holding shards is refused.
	if err := s.Write([]byte("name: other\n")); !errors.Is(err, ErrOtherPlan) {
		t.Errorf("another plan over existing shards: %v", err)
	}
}

func TestSlurmSubmitScript(t *testing.T) {
	s := Slurm{Plan: "p", Shards: 2, Dir: "/a b", Quicbench: "/q", Partial: true}
	got := s.SubmitScript()
	for _, want := range []string{
		"dir='/a b'\n",
		`array=$(sbatch --parsable "$dir/array.sh")`,
		`sbatch --parsable --dependency=afterany:"$array" "$dir/merge.sh"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("submit script lacks %q:\n%s", want, got)
		}
	}
	if err := exec.Command("bash", "-n", "-c", got).Run(); err != nil {
		t.Errorf("bash -n: %v", err)
	}
}

func TestSlurmValidate(t *testing.T) {
	ok := Slurm{Plan: "p", Shards: 1, Dir: "/d", Quicbench: "/q"}
	for _, c := range []struct {
		name string
		mod  func(*Slurm)
		want string
	}{
		{"zero shards", func(s *Slurm) { s.Shards = 0 }, "0 shards"},
		{"too many", func(s *Slurm) { s.Shards = MaxShards + 1 }, "shards"},
		{"relative dir", func(s *Slurm) { s.Dir = "d" }, "not absolute"},
		{"relative binary", func(s *Slurm) { s.Quicbench = "bin/quicbench" }, "not an absolute path"},
		{"percent", func(s *Slurm) { s.Dir = "/d%x" }, "cannot name"},
		{"quote", func(s *Slurm) { s.Dir = `/d"x` }, "cannot name"},
		{"not an option", func(s *Slurm) { s.Sbatch = []string{"main"} }, "not an option"},
		{"negative parallel", func(s *Slurm) { s.Parallel = -1 }, "parallel"},
	} {
		s := ok
		c.mod(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.name, err, c.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}

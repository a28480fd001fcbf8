// Package clitest runs quicbench plans from the tests of other packages
// (the stacks' folders): the test binary doubles as the quicbench
// executable that the runner starts as `serve` and `agent` inside the
// namespaces (Main), and RunPlan runs a plan through the runner and
// returns what it stored. Only test files import it.
package clitest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

// execEnv marks the test binary's children: they run quicbench's command
// line instead of the tests.
const execEnv = "QUICBENCH_TEST_EXEC"

// Main is a test package's TestMain: in the runner's children it runs
// quicbench's command line (cli.Main) and exits; otherwise it runs the
// tests.
func Main(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(&cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	}
	os.Setenv(execEnv, "1") // for the children
	os.Exit(m.Run())
}

// Sample is a stored sample with its cell.
type Sample struct {
	Cell model.Cell
	model.Sample
}

// Run is what a plan's run stored.
type Run struct {
	Run     *model.Run
	Samples []Sample
}

// Of returns the counted samples (warm-ups left out) whose cell matches.
func (r *Run) Of(match func(c *model.Cell) bool) []Sample {
	var out []Sample
	for _, s := range r.Samples {
		if !s.Warmup && match(&s.Cell) {
			out = append(out, s)
		}
	}
	return out
}

// RunPlan runs planText through the runner (as root: it builds testbeds;
// the test ends through testsupport otherwise) with opts' fields that are
// set (Plan, DB, Exe and the progress are RunPlan's), and returns what it
// stored. A run that fails fails the test, with its progress log.
func RunPlan(t *testing.T, planText string, opts runner.Options) *Run {
	t.Helper()
	testsupport.RequireRoot(t, "needs root for network namespaces")
	p, err := plan.Parse("plan.yaml", []byte(planText))
	if err != nil {
		t.Fatal(err)
	}
	opts.Plan = p
	opts.DB = filepath.Join(t.TempDir(), "run.db")
	opts.Exe, _ = os.Executable()
	var log strings.Builder
	opts.Progress, opts.Mode = &log, runner.ProgressLines
	if _, err := runner.Run(context.Background(), opts); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	s, err := store.OpenExisting(opts.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.LatestRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.LoadDataset(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := &Run{Run: &run}
	for _, smp := range ds.Samples {
		i := slices.IndexFunc(ds.Cells, func(c model.Cell) bool { return c.ID == smp.CellID })
		if i < 0 {
			t.Fatalf("sample of unknown cell %d", smp.CellID)
		}
		out.Samples = append(out.Samples, Sample{Cell: ds.Cells[i], Sample: smp})
	}
	return out
}

package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// Run 2 of reportDB has identical h2 and h3 values: negligible within the
// default band; with the band off the test's verdict comes back; a band
// of 100% or more is refused before anything is read.
func TestReportMinEffectFlag(t *testing.T) {
	path := reportDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "negligible (within ±5%)"},
		{[]string{"--min-effect", "0%"}, "no significant difference"},
		{[]string{"--min-effect", "2.5"}, "negligible (within ±2.5%)"},
	} {
		code, out, errs := runCLI(t, append([]string{"report", path, "--run", "2", "--text"}, c.args...)...)
		if code != ExitOK || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q in:\n%s", c.args, code, errs, c.want, out)
		}
	}
	for _, bad := range []string{"100%", "-1%", "five"} {
		code, _, errs := runCLI(t, "report", path, "--text", "--min-effect", bad)
		if code != ExitUsage || !strings.Contains(errs, "--min-effect") {
			t.Errorf("--min-effect %s: exit %d, stderr %q", bad, code, errs)
		}
	}
}

func TestMinEffectFor(t *testing.T) {
	plan := func(extra string) string {
		return "name: x\n" + extra + "scenarios:\n  - name: clean\ntests:\n  - test: ttfb\n"
	}
	for _, c := range []struct {
		flag, planText string
		want           float64
	}{
		{"", "", 0},                            // the default
		{"", plan(""), 0},                      // a plan without the field: the default
		{"", plan("min_effect: 2%\n"), 0.02},   // the plan's
		{"", plan("min_effect: 0%\n"), -1},     // the plan turns it off
		{"10%", plan("min_effect: 2%\n"), 0.1}, // the flag wins
		{"0", plan("min_effect: 2%\n"), -1},    // the flag turns it off
		{"", "name: [not a plan\n", 0},         // a stored plan that no longer parses
		{"", plan("min_effect: 200%\n"), 0},    // nor one with a bad field
	} {
		got, err := minEffectFor(c.flag, c.planText)
		if err != nil || got != c.want {
			t.Errorf("flag %q, plan %q: %v, %v; want %v", c.flag, c.planText, got, err, c.want)
		}
	}
}

// At the end of a run the per-sample overheads are printed once: in the
// terminal summary when it follows, in the run summary otherwise.
func TestRunPrintsOverheadOnce(t *testing.T) {
	path := writeResultsDB(t, func(ctx context.Context, db *store.DB) {
		run := model.Run{PlanName: "x", PlanText: "name: x\n", PlanHash: "ab", Seed: 1, Started: time.Unix(1, 0), Status: "complete"}
		if err := db.CreateRun(ctx, &run); err != nil {
			t.Fatal(err)
		}
		cells := []model.Cell{
			{Key: "a/ttfb/h2/builtin/cubic", Group: "a/ttfb/builtin/cubic", Scenario: "a", Test: "ttfb", Protocol: model.ProtoH2, Client: "builtin", CC: "cubic", Metric: "ttfb_ms", Iterations: 8},
			{Key: "a/ttfb/h3/builtin/cubic", Group: "a/ttfb/builtin/cubic", Scenario: "a", Test: "ttfb", Protocol: model.ProtoH3, Client: "builtin", CC: "cubic", Metric: "ttfb_ms", Iterations: 8},
		}
		if err := db.InsertCells(ctx, run.ID, cells); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			for k, c := range cells {
				s := model.Sample{CellID: c.ID, Iteration: i, Seed: uint64(i + 1), Order: k, Status: model.StatusOK, Value: float64(10 + i + k),
					Metrics: map[string]float64{"ttfb_ms": float64(10 + i + k)}, Overhead: time.Duration(20+i) * time.Millisecond}
				if err := db.InsertSample(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	sum := &runner.Summary{RunID: 1, Planned: 16, Taken: 16, Complete: true}
	sum.Overheads = stats.Overheads([]stats.OverheadSample{{Client: model.ClientBuiltin, Overhead: 25 * time.Millisecond}})
	env, out, errb := bufEnv()
	if err := finishRun(env, path, sum, nil, finishFlags{}); err != nil {
		t.Fatal(err)
	}
	all := out.String() + errb.String()
	if n := strings.Count(strings.ToLower(all), "per-sample overhead"); n != 1 || strings.Contains(errb.String(), "overhead") {
		t.Errorf("the overhead is printed %d times (stderr: %q):\n%s", n, errb.String(), out.String())
	}
	// --quiet: no terminal summary, so the run summary carries it
	env, out, errb = bufEnv()
	if err := finishRun(env, path, sum, nil, finishFlags{quiet: true}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errb.String()+out.String(), "per-sample overhead"); n != 1 || !strings.Contains(errb.String(), "per-sample overhead") {
		t.Errorf("quiet: the overhead is printed %d times, stderr:\n%s", n, errb.String())
	}
}

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/store"
)

// reportCLI is runCLI in dir (the test's directory when dir is empty).
func reportCLI(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if dir != "" {
		t.Chdir(dir)
	}
	return runCLI(t, args...)
}

// reportDB writes a results database with two runs of one download cell
// pair; h3 is 30% faster in run 1 and as fast as h2 in run 2. Run 1 has a
// browser version, run 2 none; both have a run-level warning.
func reportDB(t *testing.T) string {
	t.Helper()
	return writeResultsDB(t, func(ctx context.Context, db *store.DB) {
		for r, h3 := range []float64{0.7, 1.0} {
			run := model.Run{PlanName: "quick", PlanText: "name: quick\n", PlanHash: "ab", Seed: 3,
				Started: time.Date(2025, 1, 1, 0, r, 0, 0, time.UTC), Status: "complete"}
			if err := db.CreateRun(ctx, &run); err != nil {
				t.Fatal(err)
			}
			cells := []model.Cell{
				{Key: "loss-2/download/h2/builtin/cubic", Group: "loss-2/download/builtin/cubic", Scenario: "loss-2", Test: "download",
					Protocol: model.ProtoH2, Client: "builtin", CC: "cubic", Metric: "time_ms", Unit: "ms", Iterations: 12},
				{Key: "loss-2/download/h3/builtin/cubic", Group: "loss-2/download/builtin/cubic", Scenario: "loss-2", Test: "download",
					Protocol: model.ProtoH3, Client: "builtin", CC: "cubic", Metric: "time_ms", Unit: "ms", Iterations: 12},
			}
			if err := db.InsertCells(ctx, run.ID, cells); err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				for k, c := range cells {
					v := 200 + float64(i%5)*4
					if k == 1 {
						v *= h3
					}
					s := model.Sample{CellID: c.ID, Iteration: i, Seed: uint64(i + 1), Order: k, Status: model.StatusOK, Value: v,
						Metrics: map[string]float64{"time_ms": v}}
					if err := db.InsertSample(ctx, &s); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := db.AddRunWarning(ctx, run.ID, "machine has only 2 CPUs"); err != nil {
				t.Fatal(err)
			}
			if r == 0 {
				if err := db.SetRunBrowser(ctx, run.ID, "Chrome/156.0.8078.79"); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func TestReportCommandHTML(t *testing.T) {
	path := reportDB(t)
	code, out, errs := reportCLI(t, "", "report", path, "--run", "1")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := strings.TrimSuffix(path, ".db") + ".html"
	if strings.TrimSpace(out) != want {
		t.Errorf("stdout %q, want the path %s", out, want)
	}
	html, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg ", "QUIC faster", "machine has only 2 CPUs", "name: quick",
		"<tr><th>browsers</th><td>Chrome/156.0.8078.79</td></tr>"} {
		if !bytes.Contains(html, []byte(s)) {
			t.Errorf("report lacks %q", s)
		}
	}
	noTempFilesBeside(t, path)
}

func TestReportCommandTextAndStdout(t *testing.T) {
	path := reportDB(t)
	code, out, errs := reportCLI(t, "", "report", path, "--text")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// the latest run (2) has no difference: negligible within the default ±5%
	if !strings.Contains(out, "run 2") || !strings.Contains(out, "negligible (within ±5%)") || strings.Contains(out, "<html") {
		t.Errorf("text summary:\n%s", out)
	}
	if _, err := os.Stat(strings.TrimSuffix(path, ".db") + ".html"); !os.IsNotExist(err) {
		t.Error("--text without -o wrote an HTML file")
	}
	code, out, errs = reportCLI(t, "", "report", path, "-o", "-")
	if code != ExitOK || !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Errorf("-o -: exit %d, stdout starts %q, stderr %s", code, out[:min(40, len(out))], errs)
	}
}

func TestReportCommandBadInput(t *testing.T) {
	path := reportDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "one results database"},
		{[]string{"report", filepath.Join(t.TempDir(), "missing.db")}, "missing.db"},
		{[]string{"report", path, "--run", "99"}, "runs in this database: 1 (quick), 2 (quick)"},
		{[]string{"report", path, "--run", "-1"}, "run IDs are positive"},
		{[]string{"report", path, "--alpha", "2"}, "--alpha 2"},
		{[]string{"report", path, "--resamples", "10"}, "too few"},
		{[]string{"report", path, "--waterfall", "12345"}, "--waterfall 12345"},
		{[]string{"report", path, "-o", filepath.Join(t.TempDir(), "no", "such", "dir.html")}, "cannot write"},
		{[]string{"compare", path}, "two results databases"},
		{[]string{"compare", path, path}, "both run 2"},
	} {
		code, _, errs := reportCLI(t, "", c.args...)
		if code == ExitOK || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want an error mentioning %q", c.args, code, errs, c.want)
		}
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (bad input)", c.args, code, ExitUsage)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	path := reportDB(t)
	code, out, errs := reportCLI(t, "", "compare", path, path, "--run-a", "1", "--run-b", "2", "--text")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{"A: run 1", "B: run 2", "A faster", "QUIC faster", "negligible (within ±5%)", "yes",
		", browser Chrome/156.0.8078.79\n", "A: warning about the whole run: machine has only 2 CPUs\n",
		"B: warning about the whole run: machine has only 2 CPUs\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("compare text lacks %q:\n%s", s, out)
		}
	}
	dir := t.TempDir()
	code, out, errs = reportCLI(t, dir, "compare", path, path, "--run-a", "1", "--run-b", "2")
	if code != ExitOK || strings.TrimSpace(out) != "compare.html" {
		t.Fatalf("exit %d, stdout %q: %s", code, out, errs)
	}
	html, err := os.ReadFile(filepath.Join(dir, "compare.html"))
	if err != nil || !bytes.Contains(html, []byte("Protocol verdicts in both runs")) || !bytes.Contains(html, []byte("<svg ")) {
		t.Errorf("compare.html: %v, %d bytes", err, len(html))
	}
	for _, s := range []string{
		`<tr class="differs"><th>browsers</th><td>Chrome/156.0.8078.79</td><td>–</td></tr>`,
		`<tr><th>warnings about the whole run</th><td>machine has only 2 CPUs</td><td>machine has only 2 CPUs</td></tr>`,
		`<th>per-sample overhead, built-in client (p50 / p95 / max)</th>`,
	} {
		if !bytes.Contains(html, []byte(s)) {
			t.Errorf("compare.html lacks %q", s)
		}
	}
}

// noTempFilesBeside fails t if a temporary file (a dot file, as the atomic
// writeOutput makes) is left in the directory of path.
func noTempFilesBeside(t *testing.T, path string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

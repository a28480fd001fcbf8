package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

func bufEnv() (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, &out, &errb
}

// The report written at the end of a run shows what quicbench report
// shows (run-level warnings, the browser) and is written atomically.
func TestRunReportsLikeReportCommand(t *testing.T) {
	path := reportDB(t)
	db, err := store.OpenExisting(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunBrowser(context.Background(), 1, "Chrome/156.0.8078.79"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	env, out, errb := bufEnv()
	sum := &runner.Summary{RunID: 1, Planned: 24, Taken: 24, Complete: true}
	if err := finishRun(env, path, sum, nil, finishFlags{}); err != nil {
		t.Fatal(err)
	}
	htmlPath := strings.TrimSuffix(path, ".db") + ".html"
	text := out.String()
	if !strings.Contains(text, "Warnings about the whole run:\n  machine has only 2 CPUs") {
		t.Errorf("terminal summary lacks the run-level warning:\n%s", text)
	}
	if !strings.HasSuffix(text, htmlPath+"\n") {
		t.Errorf("stdout does not end with the report path %s:\n%s", htmlPath, text)
	}
	if !strings.Contains(errb.String(), "run 1 complete: 24/24 samples stored") {
		t.Errorf("stderr lacks the run summary:\n%s", errb.String())
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"machine has only 2 CPUs", "<th>browsers</th><td>Chrome/156.0.8078.79</td>"} {
		if !bytes.Contains(html, []byte(s)) {
			t.Errorf("HTML report lacks %q", s)
		}
	}
	noTempFilesBeside(t, path)

	// --report -: the HTML on stdout, without the terminal summary
	env, out, _ = bufEnv()
	if err := finishRun(env, path, sum, nil, finishFlags{report: "-"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "<!DOCTYPE html>") {
		t.Errorf("--report -: stdout starts %q", out.String()[:min(60, out.Len())])
	}
}

// --no-report prints no summary and writes no report.
func TestRunNoReport(t *testing.T) {
	path := reportDB(t)
	env, out, errb := bufEnv()
	sum := &runner.Summary{RunID: 1, Planned: 24, Taken: 24, Complete: true}
	if err := finishRun(env, path, sum, nil, finishFlags{noReport: true}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || errb.Len() != 0 {
		t.Errorf("--no-report printed:\nstdout %q\nstderr %q", out.String(), errb.String())
	}
	if _, err := os.Stat(strings.TrimSuffix(path, ".db") + ".html"); !os.IsNotExist(err) {
		t.Errorf("--no-report wrote a report (%v)", err)
	}
	// an interrupted run still says how to continue it, in the error
	err := finishRun(env, path, &runner.Summary{RunID: 1, Planned: 24, Taken: 3}, runner.ErrInterrupted, finishFlags{noReport: true})
	if ee, ok := err.(*ExitError); !ok || ee.Code != ExitSignal || !strings.Contains(ee.Hint, "--resume "+path) {
		t.Errorf("interrupted: %v", err)
	}
}

// The run summary breaks each client's per-sample overhead down into the
// link drain, the test's unmeasured preparation and the rest; a client
// without either part gets the total only.
func TestRunSummaryOverheadParts(t *testing.T) {
	ms := time.Millisecond
	sum := &runner.Summary{RunID: 3, Planned: 6, Taken: 6, Complete: true, Overheads: stats.Overheads([]stats.OverheadSample{
		{Client: model.ClientBuiltin, Overhead: 30 * ms, Drain: 26 * ms},
		{Client: model.ClientBuiltin, Overhead: 150 * ms, Drain: 25 * ms, Prep: 120 * ms},
		{Client: "chromium", Overhead: 900 * ms, Prep: 600 * ms},
		{Client: "other", Overhead: 7 * ms},
	})}
	env, _, errb := bufEnv()
	printRunSummary(env, "r.db", sum, true)
	want := `per-sample overhead outside the measured part, builtin (p50 / p95 / max): 30ms / 150ms / 150ms over 2 samples
  of which waiting for connections to close across the link: 25ms / 26ms / 26ms over 2 samples
  of which the test's unmeasured preparation (connecting, priming): 0s / 120ms / 120ms over 2 samples
  of which the runner's own work: 4ms / 5ms / 5ms over 2 samples
per-sample overhead outside the measured part, chromium (p50 / p95 / max): 900ms / 900ms / 900ms over 1 samples
  of which the test's unmeasured preparation (browser start; a warm page's priming load or the bench page's load): 600ms / 600ms / 600ms over 1 samples
  of which the runner's own work and the browser's teardown: 300ms / 300ms / 300ms over 1 samples
per-sample overhead outside the measured part, other (p50 / p95 / max): 7ms / 7ms / 7ms over 1 samples
`
	if got := errb.String(); !strings.HasSuffix(got, want) {
		t.Errorf("run summary:\n%s\nwant it to end with:\n%s", got, want)
	}
}

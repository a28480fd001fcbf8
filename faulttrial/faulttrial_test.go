package faulttrial_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/faulttrial"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// The test binary doubles as the quicbench executable that the trials run.
const execEnv = "QUICBENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(&cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	}
	os.Exit(m.Run())
}

// Environment of the long form.
const (
	trialsEnv = "QUICBENCH_FAULT_TRIALS" // trials per fault (default 2: the short form)
	faultsEnv = "QUICBENCH_FAULTS"       // comma-separated fault names (default: all)
	tableEnv  = "QUICBENCH_FAULT_TABLE"  // file to write the Markdown table to
)

// TestFaultTrials injects every fault at seeded random points of a small
// plan and checks every trial (package faulttrial). The short form (2
// trials per fault) runs in CI; QUICBENCH_FAULT_TRIALS=20 is the long form
// whose table docs/reliability.md reports.
func TestFaultTrials(t *testing.T) {
	testsupport.RequireRoot(t, "needs root (network namespaces, tmpfs)")
	if testing.Short() {
		t.Skip("fault trials run testbeds; skipped with -short")
	}
	trials := 2
	if v := os.Getenv(trialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of trials per fault", trialsEnv, v)
		}
		trials = n
	}
	var faults []string
	if v := os.Getenv(faultsEnv); v != "" {
		faults = strings.Split(v, ",")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		if faults == nil {
			testsupport.Unavailable(t, "chromium is not installed (the Chromium fault needs it)")
		}
	}
	var log strings.Builder
	res, err := faulttrial.Run(context.Background(), faulttrial.Options{
		Exe: os.Args[0], Env: []string{execEnv + "=1"}, Dir: t.TempDir(),
		Trials: trials, Seed: 20261126, Faults: faults, Log: logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	table := faulttrial.Markdown(faulttrial.Table(res))
	t.Logf("\n%s%s", log.String(), table)
	if p := os.Getenv(tableEnv); p != "" {
		if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, tr := range res {
		if !tr.Survived() {
			t.Errorf("%s, trial %d (fault after %d samples): %s", tr.Fault, tr.N, tr.Point, strings.Join(tr.Problems, "; "))
		}
	}
}

// logWriter logs each line written to it.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

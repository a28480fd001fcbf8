package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/calibrate"
)

// calCLI runs quicbench with args.
func calCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Args: args, Getenv: func(string) string { return "" }, Exe: os.Args[0]}
	code = Run(context.Background(), env)
	return code, out.String(), errb.String()
}

// stubCalibration replaces calibrate.Run for the test, recording calls.
func stubCalibration(t *testing.T, fn func(calibrate.Config) (*calibrate.Report, error)) *[]calibrate.Config {
	t.Helper()
	var calls []calibrate.Config
	old := runCalibration
	runCalibration = func(_ context.Context, cfg calibrate.Config) (*calibrate.Report, error) {
		calls = append(calls, cfg)
		return fn(cfg)
	}
	t.Cleanup(func() { runCalibration = old })
	return &calls
}

func TestCalibrateBadInputCreatesNothing(t *testing.T) {
	calls := stubCalibration(t, func(calibrate.Config) (*calibrate.Report, error) {
		t.Error("a bad command line reached the calibration")
		return nil, nil
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--link", "delay -5ms"}, `token 2 "-5ms"`},
		{[]string{"calibrate", "--up", "loss 150%"}, `"150%"`},
		{[]string{"calibrate", "--link", "rate 0"}, `"0"`},
		{[]string{"calibrate", "--link", "jitter 5ms"}, `"jitter": unknown keyword`},
		{[]string{"calibrate", "--link", "delay 1ms", "--down", "delay 2ms"}, "not both"},
		{[]string{"calibrate", "--packets", "5"}, "--packets 5"},
		{[]string{"calibrate", "--duration", "1ms"}, "--duration 1ms"},
		{[]string{"calibrate", "--cc", "vegas"}, `--cc "vegas"`},
		{[]string{"calibrate", "--link", "delay", "25ms"}, `unexpected argument "25ms"`},
	} {
		code, _, stderr := calCLI(c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
	if len(*calls) != 0 {
		t.Fatalf("%d calibrations started", len(*calls))
	}
}

func stubReport(failing bool) *calibrate.Report {
	conf := 25.0
	p99 := calibrate.Figure{Direction: "down", Name: "delay p99 idle", Unit: "ms", Configured: &conf, Measured: 25.1, Tolerance: "±150 us", Status: calibrate.StatusOK}
	if failing {
		p99.Measured, p99.Status = 25.4, calibrate.StatusFail
	}
	return &calibrate.Report{Up: "delay 25ms", Down: "delay 25ms", Seed: 3, CC: "cubic", Packets: 1000, Duration: "3s",
		Figures: []calibrate.Figure{
			{Direction: "up", Name: "delay p50 idle", Unit: "ms", Configured: &conf, Measured: 25.02, Tolerance: "±50 us", Status: calibrate.StatusOK},
			p99,
		}, OK: !failing}
}

func TestCalibrateExitStatus(t *testing.T) {
	requireRootCLI(t) // otherwise the command re-executes itself rootless
	failing := false
	calls := stubCalibration(t, func(calibrate.Config) (*calibrate.Report, error) { return stubReport(failing), nil })

	code, stdout, stderr := calCLI("calibrate", "--link", "delay 25ms", "--seed", "3", "--packets", "1000", "--throughput", "--duration", "2s", "-q")
	if code != ExitOK || !strings.Contains(stdout, "down  delay p99 idle") || !strings.Contains(stdout, "OK:") {
		t.Fatalf("passing calibration: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	cfg := (*calls)[0]
	if cfg.Up.String() != "delay 25ms" || cfg.Down.String() != "delay 25ms" || cfg.Seed != 3 || cfg.Packets != 1000 ||
		!cfg.Throughput || cfg.Duration.String() != "2s" || cfg.CC != "cubic" || cfg.Progress != nil || cfg.Exe != os.Args[0] {
		t.Fatalf("config passed: %+v", cfg)
	}

	failing = true
	code, stdout, stderr = calCLI("calibrate", "--link", "delay 25ms")
	if code != ExitFailure || !strings.Contains(stderr, "outside tolerance: down delay p99 idle") || !strings.Contains(stdout, "FAIL") {
		t.Fatalf("failing calibration: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if (*calls)[1].Progress == nil {
		t.Error("progress lines are off without -q")
	}

	code, stdout, _ = calCLI("calibrate", "--link", "delay 25ms", "--json")
	var rep calibrate.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != ExitFailure || len(rep.Figures) != 2 || rep.Figures[1].Status != calibrate.StatusFail {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, stdout)
	}
}

func TestCalibrateRealJSON(t *testing.T) {
	requireRootCLI(t)
	if testing.Short() {
		t.Skip("builds a testbed")
	}
	code, stdout, stderr := calCLI("calibrate", "--link", "delay 1ms", "--packets", "300", "--json", "-q")
	var rep calibrate.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not JSON: %v\n%s\n%s", code, err, stdout, stderr)
	}
	// The verdict is timing-dependent on a busy machine; the exit status
	// must agree with it either way.
	if (code == ExitOK) != rep.OK || (code != ExitOK && code != ExitFailure) {
		t.Fatalf("exit %d with report OK=%v\n%s", code, rep.OK, stderr)
	}
	if rep.Up != "delay 1ms" || rep.Packets != 300 || len(rep.Figures) < 10 {
		t.Fatalf("report: %+v", rep)
	}
	for _, f := range rep.Figures {
		if f.Status != calibrate.StatusOK && f.Status != calibrate.StatusFail && f.Status != calibrate.StatusInfo {
			t.Errorf("figure %q has status %q", f.Name, f.Status)
		}
	}
}

// calibrate-bulk is calibrate's internal child: hidden, and dispatched to
// calibrate.BulkMain with stdin and stdout.
func TestCalibrateBulkHidden(t *testing.T) {
	_, stdout, _ := calCLI("--help")
	if strings.Contains(stdout, calibrate.BulkCommand) {
		t.Errorf("--help lists the internal %s command:\n%s", calibrate.BulkCommand, stdout)
	}
	code, _, stderr := calCLI(calibrate.BulkCommand, "bogus")
	if code != ExitFailure || !strings.Contains(stderr, `unknown role "bogus"`) {
		t.Errorf("%s bogus: exit %d, stderr %q", calibrate.BulkCommand, code, stderr)
	}
	code, _, stderr = calCLI(calibrate.BulkCommand, "server")
	if code != ExitFailure || !strings.Contains(stderr, "reading the configuration") {
		t.Errorf("%s server with no configuration: exit %d, stderr %q", calibrate.BulkCommand, code, stderr)
	}
}

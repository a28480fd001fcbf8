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

// stubParallel replaces calibrate.RunParallel for the test, recording calls.
func stubParallel(t *testing.T, fn func(calibrate.Config, []int) (*calibrate.Report, error)) *[][]int {
	t.Helper()
	var calls [][]int
	old := runParallelCalibration
	runParallelCalibration = func(_ context.Context, cfg calibrate.Config, ns []int) (*calibrate.Report, error) {
		calls = append(calls, ns)
		return fn(cfg, ns)
	}
	t.Cleanup(func() { runParallelCalibration = old })
	return &calls
}

func TestCalibrateParallelBadInput(t *testing.T) {
	calls := stubParallel(t, func(calibrate.Config, []int) (*calibrate.Report, error) {
		t.Error("a bad command line reached the calibration")
		return nil, nil
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--parallel", "0"}, `--parallel "0": 0 testbeds: want 1 to 64`},
		{[]string{"calibrate", "--parallel", "abc"}, `--parallel "abc": "abc" is not a number of testbeds`},
		{[]string{"calibrate", "--parallel", "1,x"}, `--parallel "1,x": "x" is not a number`},
		{[]string{"calibrate", "--parallel", ""}, `--parallel ""`},
		{[]string{"calibrate", "--parallel", "65"}, "65 testbeds"},
		{[]string{"calibrate", "--parallel", "2", "--throughput"}, "cannot be combined"},
		{[]string{"calibrate", "--parallel", "2", "--link", "delay -1ms"}, `"-1ms"`},
	} {
		code, _, stderr := calCLI(c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "panic") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
	if len(*calls) != 0 {
		t.Fatalf("%d calibrations started", len(*calls))
	}
}

func TestCalibrateParallelFlags(t *testing.T) {
	requireRootCLI(t) // otherwise the command re-executes itself rootless
	var cfgs []calibrate.Config
	calls := stubParallel(t, func(cfg calibrate.Config, ns []int) (*calibrate.Report, error) {
		cfgs = append(cfgs, cfg)
		rep := stubReport(false)
		rep.Parallel = []calibrate.ParallelResult{{Testbeds: ns[0], OK: true}}
		return rep, nil
	})
	stubCalibration(t, func(calibrate.Config) (*calibrate.Report, error) {
		t.Error("--parallel ran the single-testbed calibration")
		return nil, nil
	})
	code, stdout, stderr := calCLI("calibrate", "--parallel", "1,4, 8", "--packets", "1000", "--json", "-q")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep calibrate.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Parallel) != 1 || rep.Parallel[0].Testbeds != 1 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if got := (*calls)[0]; len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 8 {
		t.Errorf("counts passed: %v", got)
	}
	// No link given: the mode's link-bound default.
	if cfg := cfgs[0]; cfg.Up.String() != "delay 25ms rate 10mbit" || cfg.Down.String() != cfg.Up.String() || cfg.Packets != 1000 {
		t.Errorf("config passed: up %q down %q, %d probes", cfg.Up, cfg.Down, cfg.Packets)
	}
	// A link given is used as it is.
	if code, _, stderr = calCLI("calibrate", "--parallel", "2", "--up", "delay 9ms rate 2mbit", "-q"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if cfg := cfgs[1]; cfg.Up.String() != "delay 9ms rate 2mbit" || cfg.Down.String() != "none" {
		t.Errorf("config passed: up %q down %q", cfg.Up, cfg.Down)
	}
}

// TestCalibrateParallelReal: two real testbeds at once, through the
// command line; the exit status must agree with the report.
func TestCalibrateParallelReal(t *testing.T) {
	requireRootCLI(t)
	if testing.Short() {
		t.Skip("builds testbeds")
	}
	code, stdout, stderr := calCLI("calibrate", "--parallel", "2", "--link", "delay 2ms rate 20mbit", "--packets", "200", "--json", "-q")
	var rep calibrate.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not JSON: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if (code == ExitOK) != rep.OK || (code != ExitOK && code != ExitFailure) {
		t.Fatalf("exit %d with report OK=%v\n%s", code, rep.OK, stderr)
	}
	if len(rep.Parallel) != 1 || rep.Parallel[0].Testbeds != 2 || len(rep.Parallel[0].Phases) != 2 ||
		len(rep.Parallel[0].Phases[1].Testbeds) != 2 || rep.Parallel[0].Phases[1].Pooled.Probes == 0 {
		t.Fatalf("report: %+v", rep.Parallel)
	}
}

// stubAdmitted replaces calibrate.RunAdmitted for the test, recording the
// configurations and counts it is called with.
func stubAdmitted(t *testing.T) (*[]calibrate.Config, *[][]int) {
	t.Helper()
	var cfgs []calibrate.Config
	var calls [][]int
	old := runAdmittedCalibration
	runAdmittedCalibration = func(_ context.Context, cfg calibrate.Config, ns []int) (*calibrate.Report, error) {
		cfgs = append(cfgs, cfg)
		calls = append(calls, ns)
		rep := stubReport(false)
		rep.Admitted = []calibrate.AdmittedResult{{Testbeds: ns[0], OK: true}}
		return rep, nil
	}
	t.Cleanup(func() { runAdmittedCalibration = old })
	return &cfgs, &calls
}

func TestCalibrateAdmittedFlags(t *testing.T) {
	cfgs, calls := stubAdmitted(t)
	stubParallel(t, func(calibrate.Config, []int) (*calibrate.Report, error) {
		t.Error("--admitted ran the probe-load calibration")
		return nil, nil
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--admitted"}, "--admitted needs --parallel"},
		{[]string{"calibrate", "--parallel", "2", "--admitted", "--link", "loss 1%"}, "--admitted needs a link with a rate or a delay"},
	} {
		code, _, stderr := calCLI(c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
	if len(*calls) != 0 {
		t.Fatalf("a bad command line started %d calibrations", len(*calls))
	}
	requireRootCLI(t) // otherwise the command re-executes itself rootless
	code, stdout, stderr := calCLI("calibrate", "--parallel", "1,64", "--admitted", "--packets", "1000", "--json", "-q")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep calibrate.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Admitted) != 1 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if got := (*calls)[0]; len(got) != 2 || got[0] != 1 || got[1] != 64 {
		t.Errorf("counts passed: %v", got)
	}
	// No link given: the mode's slow default.
	if cfg := (*cfgs)[0]; cfg.Up.String() != defaultAdmittedLink || cfg.Down.String() != defaultAdmittedLink || cfg.Packets != 1000 {
		t.Errorf("config passed: up %q down %q, %d probes", cfg.Up, cfg.Down, cfg.Packets)
	}
}

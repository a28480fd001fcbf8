package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/plan"
)

// runCLI runs the command line args in-process with an empty stdin and
// environment and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Args: args, Getenv: func(string) string { return "" }}
	code = Run(context.Background(), env)
	return code, out.String(), errb.String()
}

func TestPlansList(t *testing.T) {
	code, out, errs := runCLI(t, "plans")
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(plan.BuiltinNames()) || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME CELLS SAMPLES QUICK ESTIMATE PARALLEL DESCRIPTION" {
		t.Errorf("header %q", lines[0])
	}
	// quick: 33 cells, 423 samples, quick variant 66, estimated in minutes
	if f := strings.Fields(lines[1]); f[0] != "quick" || f[1] != "33" || f[2] != "423" || f[3] != "66" || !regexp.MustCompile(`^[12]m[0-9]+s$`).MatchString(f[4]) {
		t.Errorf("quick row %q", lines[1])
	}
	for i, name := range plan.BuiltinNames() {
		if !strings.HasPrefix(lines[i+1], name+" ") {
			t.Errorf("row %d is %q; want plan %s", i+1, lines[i+1], name)
		}
		p, err := plan.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.EstimateWith(plan.MaxParallel(plan.RefCores))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(lines[i+1]); len(f) < 7 || f[4] != plan.FormatEstimate(e.Total) || e.Total <= 0 ||
			f[5] != plan.FormatEstimate(e.Parallel) || e.Parallel <= 0 || e.Parallel > e.Total {
			t.Errorf("row %q: want the estimates %s and %s in the fifth and sixth columns", lines[i+1], plan.FormatEstimate(e.Total), plan.FormatEstimate(e.Parallel))
		}
	}
}

func TestPlansListParallel(t *testing.T) {
	// --parallel 1: the parallel column repeats the serial estimate.
	code, out, errs := runCLI(t, "plans", "--parallel", "1")
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); f[4] != f[5] {
			t.Errorf("--parallel 1: row %q", line)
		}
	}
	// --parallel 4: page-load-grid's column is its estimate with 4 testbeds.
	code, out, _ = runCLI(t, "plans", "--parallel", "4")
	p, _ := plan.Builtin("page-load-grid")
	d, _ := p.EstimateParallel(4)
	if code != ExitOK || !regexp.MustCompile(`(?m)^page-load-grid +144 +14544 +24 +35h +`+regexp.QuoteMeta(plan.FormatEstimate(d))+` `).MatchString(out) {
		t.Errorf("exit %d, --parallel 4 (page-load-grid %s):\n%s", code, plan.FormatEstimate(d), out)
	}
	for _, bad := range []string{"0", "-2", "1025"} {
		code, out, errs := runCLI(t, "plans", "--parallel", bad)
		if code != ExitUsage || out != "" || !strings.Contains(errs, "--parallel "+bad+": the testbeds at once must be 1..1024") {
			t.Errorf("--parallel %s: exit %d, stdout %q, stderr %q", bad, code, out, errs)
		}
	}
	if code, _, errs := runCLI(t, "plans", "--parallel", "many"); code != ExitUsage || !strings.Contains(errs, "many") {
		t.Errorf("--parallel many: exit %d, stderr %q", code, errs)
	}
}

func TestPlansShow(t *testing.T) {
	for _, name := range plan.BuiltinNames() {
		code, out, _ := runCLI(t, "plans", name)
		want, _ := plan.BuiltinYAML(name)
		p, _ := plan.Builtin(name)
		e, _ := p.EstimateWith(16)
		first, rest, _ := strings.Cut(out, "\n")
		wantFirst := fmt.Sprintf("# estimated duration on the reference machine: %s (%d samples), %s with 16 testbeds at once",
			plan.FormatEstimate(e.Total), p.Counts().Total(), plan.FormatEstimate(e.Parallel))
		if code != ExitOK || first != wantFirst || rest != string(want) {
			t.Errorf("%s: exit %d, first line %q (want %q), rest equal to BuiltinYAML: %t", name, code, first, wantFirst, rest == string(want))
		}
		// Still the plan: it parses back to the same cells.
		back, err := plan.Parse(name+".yaml", []byte(out))
		if err != nil || back.Hash() != p.Hash() {
			t.Errorf("%s: the printed plan does not parse back to the same plan: %v", name, err)
		}
	}
	code, out, _ := runCLI(t, "plans", "image-transfer", "--quick")
	if code != ExitOK || !strings.Contains(out, "name: image-transfer-quick") || !strings.Contains(out, "iterations: 2") ||
		!strings.HasPrefix(out, "# estimated duration on the reference machine: ") || !strings.Contains(out, "(16 samples), ") {
		t.Errorf("exit %d, quick output:\n%s", code, out)
	}
	p, _ := plan.Builtin("image-transfer")
	q, _ := p.Quick()
	if back, err := plan.Parse("q.yaml", []byte(out)); err != nil || back.Hash() != q.Hash() {
		t.Errorf("the quick variant does not parse back: %v", err)
	}
	// --parallel 1: the serial estimate alone, as before parallel runs.
	code, out, _ = runCLI(t, "plans", "page-load-grid", "--parallel", "1")
	if first, _, _ := strings.Cut(out, "\n"); code != ExitOK || first != "# estimated duration on the reference machine: 35h (14544 samples)" {
		t.Errorf("--parallel 1: exit %d, first line %q", code, first)
	}
	code, _, errs := runCLI(t, "plans", "image-transfers")
	if code != ExitUsage || !strings.Contains(errs, `no built-in plan named "image-transfers", did you mean "image-transfer"?`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

func TestPlansValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("protocols: [h2, tcp]\nscenarios: [{name: a}]\ntests: [{test: ttfb}, {test: page}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("scenarios: [{name: a}]\ntests:\n  - test: download\n    params: {size: -5MB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "plans", "validate", "--cells", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	wantOut := good + `: ok: plan "good", 1 scenario, 3 cells, 33 samples (30 counted + 3 warm-up)
  estimated duration on the reference machine: <1s, <1s with 16 testbeds at once
  note: tests[1] (page): protocol tcp skipped: the raw tcp transport takes part only in download, upload, latency and ttfb tests, not page
  a/ttfb/size=1KB/h2/builtin/cubic  x10+warm-up  up="" down=""
  a/ttfb/size=1KB/tcp/builtin/cubic  x10+warm-up  up="" down=""
  a/page/objects=10,size=10KB,connection=cold/h2/builtin/cubic  x10+warm-up  up="" down=""
`
	if out != wantOut {
		t.Errorf("output\n%s\nwant\n%s", out, wantOut)
	}
	code, out, errs = runCLI(t, "plans", "validate", good, bad, "quick")
	if code != ExitUsage {
		t.Errorf("exit %d; want %d", code, ExitUsage)
	}
	if !strings.Contains(errs, bad+`:4:20: tests[0].params.size: "-5MB": size must be positive (allowed: 1B..100GB)`) ||
		!strings.Contains(errs, "quicbench: invalid plan: "+bad) {
		t.Errorf("stderr %q", errs)
	}
	if !strings.Contains(out, good+": ok") || !strings.Contains(out, `quick: ok: plan "quick", 2 scenarios, 33 cells, 423 samples`) {
		t.Errorf("stdout %q", out)
	}
	code, _, errs = runCLI(t, "plans", "validate", filepath.Join(dir, "missing.yaml"))
	if code != ExitUsage || !strings.Contains(errs, "no such file or directory") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	// The plan's parallel field, unless --parallel says otherwise.
	four := filepath.Join(dir, "four.yaml")
	if err := os.WriteFile(four, []byte("parallel: 4\nprotocols: [h2, h3]\nscenarios: [{name: a, link: rate 10mbit}]\ntests: [{test: download, params: {size: 1MB}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		want   string
		serial bool
	}{
		{[]string{"plans", "validate", four}, "with 4 testbeds at once\n", false},
		{[]string{"plans", "validate", "--parallel", "2", four}, "with 2 testbeds at once\n", false},
		{[]string{"plans", "--parallel", "8", "validate", four}, "with 8 testbeds at once\n", false},
		{[]string{"plans", "validate", "--parallel", "1", four}, "estimated duration on the reference machine: ", true},
	} {
		code, out, errs := runCLI(t, tc.args...)
		if code != ExitOK || !strings.Contains(out, tc.want) || tc.serial == strings.Contains(out, "testbeds") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errs, tc.want)
		}
	}
	if code, _, errs := runCLI(t, "plans", "validate", "--parallel", "0", four); code != ExitUsage || !strings.Contains(errs, "must be 1..1024") {
		t.Errorf("validate --parallel 0: exit %d, stderr %q", code, errs)
	}
	code, out, _ = runCLI(t, "plans", "validate", "--quick", "degraded-networks")
	if code != ExitOK || !strings.Contains(out, `plan "degraded-networks-quick", 2 scenarios, 78 cells, 156 samples (156 counted + 0 warm-up)`) ||
		!strings.Contains(out, "note: quick: tests[8] (download) dropped") ||
		!strings.Contains(out, "on each test's first scenario only (baseline)") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

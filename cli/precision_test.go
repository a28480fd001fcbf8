package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/plan"
)

func TestWithPrecisionFlags(t *testing.T) {
	p, err := plan.Builtin("quick")
	if err != nil {
		t.Fatal(err)
	}
	q, err := withPrecision(p, "5%", 30)
	if err != nil {
		t.Fatal(err)
	}
	if q.Precision() != 5 || !strings.Contains(string(q.YAML()), "max_iterations: 30") {
		t.Errorf("--precision 5%% --max-iterations 30: precision %v, YAML:\n%s", q.Precision(), q.YAML())
	}
	off, err := withPrecision(q, "0", 0)
	if err != nil || off.Precision() != 0 {
		t.Errorf("--precision 0: %v, %v", off, err)
	}
	for _, tt := range []struct {
		prec string
		max  int
		want string
	}{
		{"five", 0, `--precision "five"`},
		{"150%", 0, "want a percentage"},
		{"", 40, "--max-iterations needs a precision target"},
		{"5%", 10, "below the 20 iterations of tests[0] (ttfb)"},
		{"5%", -1, "--max-iterations -1"},
	} {
		_, err := withPrecision(p, tt.prec, tt.max)
		var ee *ExitError
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("--precision %q --max-iterations %d: %v, want a usage error containing %q", tt.prec, tt.max, err, tt.want)
		}
	}
}

package spec

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestLossLongRun(t *testing.T) {
	parse := func(s string) Loss {
		l, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return l.Loss
	}
	for _, c := range []struct {
		spec  string
		p     float64
		indep bool
	}{
		{"delay 1ms", 0, true},
		{"loss 2%", 0.02, true},
		{"loss 2% 25%", 0.02, false},
		// Gilbert: P=1%, R=10%, loss 100% in bad, 0 in good: P/(P+R).
		{"loss gemodel 1% 10%", 0.01 / 0.11, false},
		// gemodel P alone is Bernoulli P (R = 1-P).
		{"loss gemodel 1%", 0.01, true},
		// P = 0: the chain never leaves the good state it starts in.
		{"loss gemodel 0% 30% 100% 2%", 0.02, true},
		// 4-state with P13 = 1%, P31 = 99% (default 1-P13): the chain
		// alternates between 1 and 3; pi3 = P13/(P13+P31).
		{"loss state 1%", 0.01 / 1.0, false},
	} {
		p, indep := parse(c.spec).LongRun()
		if !near(p, c.p, 1e-9) || indep != c.indep {
			t.Errorf("%q: LongRun = %v, %v; want %v, %v", c.spec, p, indep, c.p, c.indep)
		}
	}
	// Isolated losses: state 1 -> 4 with P14, 4 -> 1 always: pi4 = P14/(1+P14).
	p := stateLoss(Loss{Model: LossState, P13: 0, P31: 100, P14: 5})
	if !near(p, 0.05/1.05, 1e-9) {
		t.Errorf("stateLoss(P14=5%%) = %v, want %v", p, 0.05/1.05)
	}
}

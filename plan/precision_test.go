package plan

import (
	"strings"
	"testing"
)

const adaptivePlan = `name: adaptive
iterations: 6
precision: 5%
max_iterations: 40
scenarios:
  - name: clean
tests:
  - test: ttfb
    iterations: 20
  - test: download
`

func TestAdaptivePlan(t *testing.T) {
	p, err := Parse("adaptive.yaml", []byte(adaptivePlan))
	if err != nil {
		t.Fatal(err)
	}
	if p.Precision() != 5 {
		t.Fatalf("Precision() = %v, want 5", p.Precision())
	}
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		c := &cells[i]
		want := map[string]int{"ttfb": 20, "download": 6}[c.Test]
		if c.Iterations != 40 || p.MinIterationsFor(c) != want {
			t.Errorf("%s: iterations %d, at least %d; want 40, at least %d", c.Key, c.Iterations, p.MinIterationsFor(c), want)
		}
	}
	// the rendering keeps the rule, and parses back to the same plan
	q, err := Parse("again.yaml", p.render())
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || q.Precision() != 5 {
		t.Errorf("rendered plan: hash %s precision %v, want %s and 5", q.Hash(), q.Precision(), p.Hash())
	}
	// the rule is part of what the plan measures
	fixed, err := p.WithPrecision(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Precision() != 0 || fixed.Hash() == p.Hash() {
		t.Errorf("WithPrecision(0): precision %v, same hash %v", fixed.Precision(), fixed.Hash() == p.Hash())
	}
	tighter, err := fixed.WithPrecision(2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tighter.Precision() != 2 || tighter.Hash() == p.Hash() || !strings.Contains(string(tighter.YAML()), "max_iterations: 60") {
		t.Errorf("WithPrecision(2, 0): precision %v, YAML:\n%s", tighter.Precision(), tighter.YAML())
	}
	// a quick variant is a smoke run of fixed iterations
	quick, err := p.Quick()
	if err != nil {
		t.Fatal(err)
	}
	if quick.Precision() != 0 {
		t.Errorf("quick variant keeps precision %v", quick.Precision())
	}
	// a plan without the rule runs its iterations
	if fixed.MinIterationsFor(&fixed.cells[0]) != fixed.cells[0].Iterations {
		t.Error("fixed plan: MinIterationsFor differs from Iterations")
	}
}

func TestAdaptivePlanErrors(t *testing.T) {
	base := "name: x\nscenarios:\n  - name: clean\ntests:\n  - test: ttfb\n"
	for _, tt := range []struct{ extra, want string }{
		{"precision: 5\n", `plan.yaml:1:12: precision: "5": expected a percentage such as 5%`},
		{"precision: 0%\n", "more than 0%"},
		{"precision: 101%\n", "at most 100%"},
		{"max_iterations: 20\n", "only with precision"},
		{"precision: 5%\nmax_iterations: 8\n", `max_iterations: "8": below the 10 iterations of tests[0] (ttfb)`},
		{"precision: [5%]\n", "expected a percentage such as 5%, got a list"},
	} {
		_, err := Parse("plan.yaml", []byte(tt.extra+base))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error containing %q", tt.extra, err, tt.want)
		}
	}
}

package plan

import (
	"strings"
	"testing"
)

// min_effect is read, rendered, kept by the quick variant and left out of
// the hash: it changes how the samples are judged, not which are taken.
func TestMinEffect(t *testing.T) {
	base := "name: x\nscenarios:\n  - name: clean\ntests:\n  - test: ttfb\n"
	without, err := Parse("plan.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if v, set := without.MinEffect(); set || v != 0 {
		t.Errorf("no min_effect: %v %v", v, set)
	}
	for _, tt := range []struct {
		text string
		want float64
	}{{"min_effect: 2.5%\n", 2.5}, {"min_effect: 0%\n", 0}} {
		p, err := Parse("plan.yaml", []byte(tt.text+base))
		if err != nil {
			t.Fatal(err)
		}
		if v, set := p.MinEffect(); !set || v != tt.want {
			t.Errorf("%q: MinEffect() = %v, %v", tt.text, v, set)
		}
		if p.Hash() != without.Hash() {
			t.Errorf("%q changes the plan's hash", tt.text)
		}
		again, err := Parse("again.yaml", p.render())
		if err != nil {
			t.Fatal(err)
		}
		if v, set := again.MinEffect(); !set || v != tt.want || !strings.Contains(string(p.render()), "min_effect: ") {
			t.Errorf("%q: rendered and parsed again: %v %v\n%s", tt.text, v, set, p.render())
		}
		q, err := p.Quick()
		if err != nil {
			t.Fatal(err)
		}
		if v, set := q.MinEffect(); !set || v != tt.want {
			t.Errorf("%q: the quick variant has %v %v", tt.text, v, set)
		}
	}
	for _, tt := range []struct{ extra, want string }{
		{"min_effect: 5\n", `plan.yaml:1:13: min_effect: "5": expected a percentage such as 5%`},
		{"min_effect: -1%\n", "at least 0%"},
		{"min_effect: 100%\n", "below 100%"},
		{"min_effect: [5%]\n", "expected a percentage such as 5%, got a list"},
	} {
		_, err := Parse("plan.yaml", []byte(tt.extra+base))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error containing %q", tt.extra, err, tt.want)
		}
	}
}

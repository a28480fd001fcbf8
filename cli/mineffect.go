package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/quicbench/quicbench/plan"
)

// minEffectHelp is the help of --min-effect, shared by run, report,
// compare and check-parallel.
const minEffectHelp = "smallest effect of interest, e.g. 5%: a difference whose 95% interval lies within ± this share of the reference is negligible (default: the plan's min_effect, else 5%; 0% turns the rule off)"

// parseMinEffect reads --min-effect ("5%", "2.5", "0%") as a fraction.
func parseMinEffect(s string) (float64, error) {
	num, _ := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(v >= 0 && v < 100) {
		return 0, Usage(fmt.Errorf("--min-effect %q: want a percentage from 0%% (off) to below 100%%, e.g. 5%%", s), "")
	}
	return v / 100, nil
}

// statsMinEffect turns a smallest effect of interest as a fraction into
// stats.Config.MinEffect and parcheck.Config.MinEffect, where 0 means the
// default and a negative value turns the rule off.
func statsMinEffect(frac float64) float64 {
	if frac == 0 {
		return -1
	}
	return frac
}

// minEffectFor resolves the smallest effect of interest of a run for the
// statistics (stats.Config.MinEffect): --min-effect when given (flag not
// empty), else the min_effect of the run's plan (planText, as stored with
// the run), else 0 (the default, 5%). A stored plan that no longer parses
// gives the default: the field is optional and the report must still be
// drawn.
func minEffectFor(flag, planText string) (float64, error) {
	if flag != "" {
		v, err := parseMinEffect(flag)
		if err != nil {
			return 0, err
		}
		return statsMinEffect(v), nil
	}
	if planText == "" {
		return 0, nil
	}
	p, err := plan.Parse("stored plan", []byte(planText))
	if err != nil {
		return 0, nil
	}
	return planMinEffect(p), nil
}

// planMinEffect is a plan's min_effect for the statistics: 0 (the
// default) when the plan does not set it.
func planMinEffect(p *plan.Plan) float64 {
	pct, set := p.MinEffect()
	if !set {
		return 0
	}
	return statsMinEffect(pct / 100)
}

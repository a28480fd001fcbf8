package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// num formats a measured value with three to four significant digits; "–"
// for NaN.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.001:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2e", v)
}

// count formats a median of counts: whole numbers without decimals, halves
// with one.
func count(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// pct formats a ratio as a signed percentage: 0.123 -> "+12.3%".
func pct(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}

// interval formats a confidence interval as "[lo, hi]".
func interval(iv stats.Interval) string {
	if !iv.Valid() {
		return "–"
	}
	return "[" + num(iv.Lo) + ", " + num(iv.Hi) + "]"
}

// cliff formats Cliff's delta with its magnitude.
func cliff(d float64, mag string) string {
	if math.IsNaN(d) {
		return "–"
	}
	return fmt.Sprintf("%+.2f %s", d, mag)
}

// metricDesc describes a cell's primary metric: "time (ms), lower is better".
func metricDesc(c *model.Cell) string {
	s := c.Metric
	if c.Unit != "" {
		s += " (" + c.Unit + ")"
	}
	if c.HigherIsBetter {
		return s + ", higher is better"
	}
	return s + ", lower is better"
}

// axisLabel is the metric with its unit, for chart axes.
func axisLabel(c *model.Cell) string {
	if c.Unit == "" {
		return c.Metric
	}
	return c.Metric + " (" + c.Unit + ")"
}

// ruleText phrases the page-load rule's outcome of a comparison.
func ruleText(c *stats.Comparison, cfg stats.Config) string {
	r := c.Rule
	pa, pb := c.A.Cell.Protocol, c.B.Cell.Protocol
	switch r.Outcome {
	case stats.Insufficient:
		return "no pairs"
	case stats.ABetter:
		return fmt.Sprintf("%s (%.0f%% of %d pairs)", pa, 100*r.AShare, r.Pairs)
	case stats.BBetter:
		return fmt.Sprintf("%s (%.0f%% of %d pairs)", pb, 100*r.BShare, r.Pairs)
	}
	return fmt.Sprintf("tie (%.0f%% / %.0f%% of %d pairs)", 100*r.AShare, 100*r.BShare, r.Pairs)
}

// verdictClass is the CSS class of a verdict cell: "quic" (red) when the
// QUIC side wins, "tcp" (blue) when the TCP side wins, "a"/"b" between two
// protocols of one family, "ns" otherwise.
func verdictClass(c *stats.Comparison) string {
	qa, qb := model.IsQUIC(c.A.Cell.Protocol), model.IsQUIC(c.B.Cell.Protocol)
	switch c.Verdict {
	case stats.ABetter:
		if qa && !qb {
			return "quic"
		}
		return "a"
	case stats.BBetter:
		if qa && !qb {
			return "tcp"
		}
		return "b"
	case stats.Insufficient:
		return "few"
	case stats.Negligible:
		return "neg"
	}
	return "ns"
}

// familyText names the family a comparison's p-value was corrected in,
// with its size: "download (2)", "run (18)".
func familyText(c *stats.Comparison) string {
	if c.FamilySize == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%d)", c.Family, c.FamilySize)
}

// verdictMethod states, for the terminal, how verdicts are decided.
func verdictMethod(cfg stats.Config, n int) string {
	fam := "within each family (one test and metric)"
	if cfg.CorrectionScope == stats.ScopeRun {
		fam = fmt.Sprintf("over all %d comparisons of the run", n)
	}
	band := "no smallest effect of interest"
	if cfg.MinEffect > 0 {
		band = "negligible where the 95% CI of the effect lies within " + stats.BandText(cfg.MinEffect)
	}
	return fmt.Sprintf("Verdict: Wilcoxon signed-rank test of the pairs (same iteration and seed), Mann-Whitney U when unpaired, Holm-corrected %s, alpha %g; too few samples where the design cannot reach alpha; %s.", fam, cfg.Alpha, band)
}

// pairName is "h3 vs h2".
func pairName(c *stats.Comparison) string {
	return c.A.Cell.Protocol + " vs " + c.B.Cell.Protocol
}

// anchor makes a fragment identifier from a name.
func anchor(prefix, name string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// truncate shortens s to at most n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

package parcheck

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// header names the columns of the table, shared by the text and the
// Markdown rendering.
var header = []string{"CELL", "PAIRS", "SERIAL", "PARALLEL", "SHIFT", "HL [95% CI]", "P", "P HOLM", "CONC", "VERDICT"}

// row renders one cell's columns.
func (c Cell) row() []string {
	return []string{
		c.Key,
		pairsText(c),
		value(c.SerialMedian, c.Unit),
		value(c.ParallelMedian, c.Unit),
		pct(c.ShiftPct),
		hlText(c),
		pValue(c.P),
		pValue(c.PAdj),
		concText(c.MaxConcurrency),
		string(c.Verdict),
	}
}

// pairsText is the pair count, with the valid samples of each run when
// some did not pair.
func pairsText(c Cell) string {
	if c.Pairs == c.SerialValid && c.Pairs == c.ParallelValid {
		return strconv.Itoa(c.Pairs)
	}
	return fmt.Sprintf("%d (%d/%d valid)", c.Pairs, c.SerialValid, c.ParallelValid)
}

func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	s := strconv.FormatFloat(v, 'g', 4, 64)
	if strings.Contains(s, "e") {
		s = strconv.FormatFloat(v, 'f', 1, 64)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", v)
}

func hlText(c Cell) string {
	if math.IsNaN(c.HLPct) {
		return "-"
	}
	if !c.HLCIPct.Valid() {
		return pct(c.HLPct) + " [-]"
	}
	return fmt.Sprintf("%s [%s, %s]", pct(c.HLPct), pct(c.HLCIPct.Lo), pct(c.HLCIPct.Hi))
}

func pValue(p float64) string {
	switch {
	case math.IsNaN(p):
		return "-"
	case p < 0.001:
		return "<0.001"
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

func concText(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// legend explains the columns, below both renderings.
func (r *Result) legend() []string {
	return []string{
		"SERIAL, PARALLEL: medians of the paired valid samples of each run; SHIFT: (parallel - serial) / serial median.",
		fmt.Sprintf("HL: Hodges-Lehmann estimate of the paired difference parallel - serial with its %g%% interval, in %% of the serial median.", 100*r.Config.Level),
		"P: Wilcoxon signed-rank test of the pairs (same cell, same iteration, same emulator seed); P HOLM: Holm-adjusted over the cells.",
		"CONC: the most testbeds active at once while a parallel sample of the cell ran.",
		fmt.Sprintf("moved: P HOLM < %g and the HL interval wholly outside %s (docs/statistics.md, \"Practical significance\"); same: otherwise; too few pairs: fewer than %d.",
			r.Config.Alpha, r.bandText(), r.Config.MinPairs),
	}
}

// WriteText writes the comparison as an aligned table, a legend, the
// notes and the overall verdict.
func (r *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, c := range r.Cells {
		fmt.Fprintln(tw, strings.Join(c.row(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, l := range r.legend() {
		b.WriteString(l + "\n")
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + n + "\n")
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", r.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// Source describes the runs for the Markdown rendering.
type Source struct {
	Plan     string // plan name
	Serial   string // serial run's database
	Parallel string // parallel run's database
	N        int    // the parallel run's --parallel
}

// WriteMarkdown writes the comparison as a Markdown page (a pipe table,
// readable as plain text too): what was compared, the table, the legend,
// the notes and the verdict.
func (r *Result) WriteMarkdown(w io.Writer, src Source) error {
	var b strings.Builder
	b.WriteString("# Does parallel change the answer?\n\n")
	fmt.Fprintf(&b, "Plan `%s`, run one testbed at a time (`%s`) and with up to %d testbeds at once (`%s`); ",
		src.Plan, src.Serial, src.N, src.Parallel)
	fmt.Fprintf(&b, "the parallel run had at most %s at once.\n\n", plural(r.MaxConcurrency, "testbed"))
	fmt.Fprintf(&b, "**Verdict: %s**\n\n", r.Summary())
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(header)) + "\n")
	for _, c := range r.Cells {
		cols := c.row()
		cols[0] = "`" + cols[0] + "`"
		b.WriteString("| " + strings.Join(cols, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, l := range r.legend() {
		b.WriteString("- " + l + "\n")
	}
	for _, n := range r.Notes {
		b.WriteString("- **Note:** " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, what string) string {
	if n <= 0 {
		return "an unrecorded number of " + what + "s"
	}
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// Text writes a terminal summary of ds to w. It opens with the run, its
// per-sample overheads and the verdict matrix (network scenarios by tests,
// each cell listing its protocol comparisons, as the HTML report's first
// screen); then per configuration the median of each protocol, and each
// comparison's effect with its interval, adjusted p-value with its family
// and size, the test that decided, the verdict (with the pairs a design
// too small would need and any difference in failures) and the page-load
// rule outcome, in aligned columns; under a comparison whose sides failed
// at different rates, its variant with failures ranked worst. Then the
// failed samples and validity warnings.
func Text(w io.Writer, ds *model.Dataset, opts Options) error {
	an, opts, err := analyze(ds, opts)
	if err != nil {
		return err
	}
	run := ds.Run
	var counted, failed int
	for _, cs := range an.Cells {
		counted += cs.Summary.N
		failed += len(cs.Failed)
	}
	protos := protocols(an.Cells)
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "quicbench: %s, run %d (%s), seed %d: %d valid samples, %d failed or invalid\n",
		termSafe(orDash(run.PlanName)), run.ID, termSafe(orDash(run.Status)), run.Seed, counted, failed)
	for _, r := range overheadRows(ds) {
		fmt.Fprintf(ew, "%s%s: %s\n", strings.ToUpper(r.K[:1]), r.K[1:], r.V)
	}
	if line := stopSummary(ds.Stops); line != "" {
		fmt.Fprintln(ew, line)
	}
	if line := parallelLine(ds); line != "" {
		fmt.Fprintln(ew, "Parallel testbeds: "+line+".")
	}
	c := an.Config
	if m := textMatrix(an); m != nil {
		neg := ""
		if c.MinEffect > 0 {
			neg = fmt.Sprintf(", ≈ negligible (95%% CI within %s), >~ better but possibly negligible", stats.BandText(c.MinEffect))
		}
		fmt.Fprintf(ew, "\nVerdicts by network and test (> better%s, · no significant difference, ? too few samples):\n", neg)
		table(ew, m)
	}
	fmt.Fprintf(ew, "\n%s Effect: Hodges-Lehmann estimate of A - B in %% of B's median [95%% CI]. Rule: >=%.0f%% better in >=%.0f%% of paired runs.\n\n",
		verdictMethod(c, len(an.Comparisons)), 100*c.Margin, 100*c.Share)

	head := []string{"TEST", "CONFIGURATION", "METRIC"}
	for _, p := range protos {
		head = append(head, termSafe(strings.ToUpper(p)))
	}
	head = append(head, "COMPARISON", "EFFECT [95% CI]", "P(HOLM)", "FAMILY", "DECIDED BY", "VERDICT", "10%/70% RULE")
	rows := [][]string{head}
	for _, g := range an.Groups {
		cell := g.Cells[0].Cell
		metric := cell.Metric
		if cell.Unit != "" {
			metric += " " + cell.Unit
		}
		row := []string{termSafe(g.Test), termSafe(g.Label()), termSafe(metric)}
		for _, p := range protos {
			v := ""
			if cs := g.Cell(p); cs != nil {
				v = num(cs.Summary.Median)
			}
			row = append(row, v)
		}
		if len(g.Comparisons) == 0 {
			rows = append(rows, append(row, "", "", "", "", "", "", ""))
			continue
		}
		for i, cmp := range g.Comparisons {
			if i > 0 {
				for k := range row {
					row[k] = ""
				}
			}
			rows = append(rows, append(slices.Clone(row), termSafe(pairName(cmp)), strings.ReplaceAll(effectText(cmp), "−", "-"), stats.FormatP(cmp.P),
				termSafe(familyText(cmp)), cmp.Test.Label(), termSafe(cmp.Text()), termSafe(ruleText(cmp, c))))
			if f := cmp.Failures; f.Differs {
				blank := make([]string, len(row))
				rows = append(rows, append(blank, "  failures as worst", "", stats.FormatP(f.WorstP),
					termSafe(familyText(cmp)), f.Worst.Label(), termSafe(cmp.WorstText()), ""))
			}
		}
	}
	table(ew, rows)
	fails, warns := validity(an)
	if len(fails) > 0 {
		fmt.Fprintf(ew, "\nFailed or invalid samples: %d\n", failed)
		for _, f := range fails {
			for _, cause := range f.Causes {
				fmt.Fprintf(ew, "  %s: %s\n", termSafe(f.Cell), termSafe(cause))
			}
		}
	}
	if len(opts.RunWarnings) > 0 {
		fmt.Fprintln(ew, "\nWarnings about the whole run:")
		for _, w := range opts.RunWarnings {
			fmt.Fprintf(ew, "  %s\n", termSafe(w))
		}
	}
	if len(warns) > 0 {
		fmt.Fprintln(ew, "\nValidity warnings:")
		for _, wr := range warns {
			fmt.Fprintf(ew, "  %s: %d samples (%s)\n", termSafe(wr.Text), wr.Count, termSafe(wr.Cells))
		}
	}
	return ew.err
}

// table writes rows in columns aligned with two spaces between them, with
// no trailing blanks.
func table(w io.Writer, rows [][]string) {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		io.WriteString(w, strings.TrimRight(line, " \n")+"\n")
	}
}

// errWriter remembers the first write error so that a sequence of Fprintf
// calls needs one check.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("report: writing text: %w", err)
	}
	return n, err
}

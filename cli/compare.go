package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/report"
)

func init() { Register("compare", newCompareCommand) }

func newCompareCommand(env *Env) *cobra.Command {
	var (
		f          reportFlags
		runA, runB int64
	)
	cmd := &cobra.Command{
		Use:   "compare A.db B.db",
		Short: "Compare two runs cell by cell (before/after an upgrade, cubic vs bbr...)",
		Long: `Compares run B with run A: every cell present in both (matched by key, or by
key without the congestion control when that is unique, so cubic and bbr
runs compare) gets its change from A to B with a Mann-Whitney test
Holm-corrected over all matched cells, and the protocol verdicts of both
runs are shown side by side with those that changed. The HTML also lists
how the runs' software and settings differ, with their browsers, per-sample
overheads and run-level warnings.

The latest run of each database is used unless --run-a/--run-b say otherwise;
the two paths may be the same database. The HTML goes to compare.html in the
current directory unless -o says otherwise; --text prints a terminal summary.`,
		Example: `  quicbench compare before.db after.db
  quicbench compare results.db results.db --run-a 1 --run-b 2 --text`,
		Args: exactArgs(2, "compare takes two results databases", "quicbench compare A.db B.db [-o compare.html] [--text]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			if runA < 0 || runB < 0 {
				return Usage(fmt.Errorf("--run-a %d / --run-b %d: run IDs are positive", runA, runB), "omit them for the latest runs")
			}
			a, na, err := loadRun(cmd.Context(), args[0], runA)
			if err != nil {
				return fmt.Errorf("run A: %w", err)
			}
			b, nb, err := loadRun(cmd.Context(), args[1], runB)
			if err != nil {
				return fmt.Errorf("run B: %w", err)
			}
			if args[0] == args[1] && a.Run.ID == b.Run.ID {
				return Usage(fmt.Errorf("run A and run B are both run %d of %s", a.Run.ID, args[0]),
					"choose two runs with --run-a and --run-b")
			}
			opts.Source, opts.SourceB = args[0], args[1]
			// the band of run A's plan unless --min-effect says otherwise
			if opts.Stats.MinEffect, err = minEffectFor(f.minEffect, a.Run.PlanText); err != nil {
				return err
			}
			if f.text {
				if err := report.CompareText(env.Stdout, a, b, opts, na, nb); err != nil {
					return err
				}
				if f.out == "" {
					return nil
				}
			}
			out := f.out
			if out == "" {
				out = "compare.html"
			}
			return writeOutput(env, out, func(w io.Writer) error { return report.CompareHTML(w, a, b, opts, na, nb) })
		},
	}
	f.register(cmd, "HTML output file (default compare.html; - for standard output)")
	cmd.Flags().Int64Var(&runA, "run-a", 0, "run of A.db (default: its latest)")
	cmd.Flags().Int64Var(&runB, "run-b", 0, "run of B.db (default: its latest)")
	return cmd
}

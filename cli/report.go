package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/report"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

func init() { Register("report", newReportCommand) }

// reportFlags are the options shared by report and compare.
type reportFlags struct {
	text        bool
	out         string
	maxCharts   int
	maxHeatmaps int
	alpha       float64
	resamples   int
	seed        uint64
	correction  string
	minEffect   string // --min-effect as given; "" when not
}

// outputAliases are earlier spellings of -o/--output (run's --out), still
// accepted so that existing scripts keep working, but hidden from the help
// so that the help shows one spelling.
var outputAliases = []string{"out"}

// outputFlag registers -o/--output on cmd, storing its value in p: the one
// spelling of the output flag of run, report, compare and export. The
// outputAliases are registered as hidden flags bound to the same variable.
func outputFlag(cmd *cobra.Command, p *string, usage string) {
	fl := cmd.Flags()
	fl.StringVarP(p, "output", "o", "", usage)
	for _, old := range outputAliases {
		fl.StringVar(p, old, "", usage+" (old spelling of --output)")
		_ = fl.MarkHidden(old)
	}
}

func (f *reportFlags) register(cmd *cobra.Command, outHelp string) {
	outputFlag(cmd, &f.out, outHelp)
	fl := cmd.Flags()
	fl.BoolVar(&f.text, "text", false, "print the terminal summary to standard output (and write HTML only if -o is given)")
	fl.IntVar(&f.maxCharts, "max-charts", 8, "configurations per test that get their own CDF, timeline and waterfall figures")
	fl.IntVar(&f.maxHeatmaps, "max-heatmaps", 12, "heatmaps per test")
	fl.Float64Var(&f.alpha, "alpha", 0.05, "significance level after Holm's correction")
	fl.IntVar(&f.resamples, "resamples", 2000, "bootstrap resamples for the intervals of medians")
	fl.Uint64Var(&f.seed, "seed", 0, "bootstrap seed (0: the run's seed)")
	fl.StringVar(&f.correction, "correction", stats.ScopeFamily, "scope of Holm's correction: family (one test and metric) or run (every comparison)")
	fl.StringVar(&f.minEffect, "min-effect", "", minEffectHelp)
}

func (f *reportFlags) options() (report.Options, error) {
	switch {
	case f.maxCharts < 1:
		return report.Options{}, Usage(fmt.Errorf("--max-charts %d: must be at least 1", f.maxCharts), "")
	case f.maxHeatmaps < 1:
		return report.Options{}, Usage(fmt.Errorf("--max-heatmaps %d: must be at least 1", f.maxHeatmaps), "")
	case !(f.alpha > 0 && f.alpha < 1):
		return report.Options{}, Usage(fmt.Errorf("--alpha %v: must be between 0 and 1", f.alpha), "the usual value is 0.05")
	case f.correction != stats.ScopeFamily && f.correction != stats.ScopeRun:
		return report.Options{}, Usage(fmt.Errorf("--correction %q: must be family or run", f.correction), "family corrects within one test and metric; run over every comparison")
	case f.resamples < 100:
		return report.Options{}, Usage(fmt.Errorf("--resamples %d: too few for a 95%% interval", f.resamples), "use at least 1000; the default is 2000")
	}
	if f.minEffect != "" {
		if _, err := parseMinEffect(f.minEffect); err != nil {
			return report.Options{}, err
		}
	}
	return report.Options{
		MaxGroupCharts: f.maxCharts, MaxHeatmaps: f.maxHeatmaps,
		Stats: stats.Config{Alpha: f.alpha, Resamples: f.resamples, Seed: f.seed, CorrectionScope: f.correction},
	}, nil
}

func newReportCommand(env *Env) *cobra.Command {
	var (
		f         reportFlags
		runID     int64
		waterfall int64
	)
	cmd := &cobra.Command{
		Use:   "report RESULTS.db",
		Short: "Write the HTML report (or a terminal summary) of a run",
		Long: `Reads a run from a results database and writes one self-contained HTML file
(no network access needed to view it, printable): the verdicts first, then per
test the charts of the studies quicbench re-runs (bars with confidence
intervals, CDFs, heatmaps over grid factors, decision trees, head-of-line,
streaming and CPU timelines, resource waterfalls), tables with every summary
statistic, the comparisons with their significance, the transport statistics
that explain them, every failed sample and warning, and the environment.

By default the latest run is reported and the HTML goes next to the database
(results.db -> results.html); -o - writes it to standard output. --text prints
the terminal summary instead.`,
		Example: `  quicbench report results.db
  quicbench report results.db -o report.html --run 2
  quicbench report results.db --text`,
		Args: exactArgs(1, "report takes one results database", "quicbench report RESULTS.db [-o report.html] [--text] [--run ID]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			if runID < 0 {
				return Usage(fmt.Errorf("--run %d: run IDs are positive", runID), "omit --run for the latest run")
			}
			opts.WaterfallSample = waterfall
			path := args[0]
			ds, notes, err := loadRun(cmd.Context(), path, runID)
			if err != nil {
				return err
			}
			noteRunState(env, path, ds.Run.ID, ds.Run.Status, len(ds.Samples))
			if waterfall != 0 && !hasResources(ds, waterfall) {
				return Usage(fmt.Errorf("--waterfall %d: run %d has no valid sample with that ID and browser resources", waterfall, ds.Run.ID),
					"sample IDs are in the samples table (quicbench export)")
			}
			opts.Source, opts.RunWarnings, opts.Browser = path, notes.Warnings, notes.Browser
			if opts.Stats.MinEffect, err = minEffectFor(f.minEffect, ds.Run.PlanText); err != nil {
				return err
			}
			if f.text {
				if err := report.Text(env.Stdout, ds, opts); err != nil {
					return err
				}
				if f.out == "" {
					return nil
				}
			}
			out := f.out
			if out == "" {
				out = strings.TrimSuffix(path, filepath.Ext(path)) + ".html"
			}
			return writeOutput(env, out, func(w io.Writer) error { return report.HTML(w, ds, opts) })
		},
	}
	f.register(cmd, "HTML output file (default: the database path with .html; - for standard output)")
	cmd.Flags().Int64Var(&runID, "run", 0, "run to report (default: the latest)")
	cmd.Flags().Int64Var(&waterfall, "waterfall", 0, "ID of a sample whose resource waterfall to draw")
	return cmd
}

// hasResources reports whether the run has a valid sample id with resources.
func hasResources(ds *model.Dataset, id int64) bool {
	for _, s := range ds.Samples {
		if s.ID == id {
			return !s.Warmup && s.Status == model.StatusOK && len(s.Resources) > 0
		}
	}
	return false
}

// loadRun reads a run (the latest when runID is 0) from a results
// database, with what the store keeps about it outside the dataset: its
// run-level warnings and the browser of its chromium samples (shown by the
// report as quicbench run's own report shows them, see writeReports).
func loadRun(ctx context.Context, path string, runID int64) (*model.Dataset, report.RunNotes, error) {
	var none report.RunNotes
	if _, err := os.Stat(path); err != nil {
		return nil, none, Usage(fmt.Errorf("results database %s: %w", path, err), "give the database written by quicbench run")
	}
	db, err := store.OpenReadOnly(path)
	if err != nil {
		return nil, none, dbOpenError(err, "give the database written by quicbench run")
	}
	defer db.Close()
	var run model.Run
	if runID == 0 {
		run, err = db.LatestRun(ctx)
	} else {
		run, err = db.RunByID(ctx, runID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, none, Usage(err, runsHint(ctx, db))
	}
	if err != nil {
		return nil, none, err
	}
	ds, err := db.LoadDataset(ctx, run.ID)
	if err != nil {
		return nil, none, fmt.Errorf("loading run %d from %s: %w", run.ID, path, err)
	}
	var notes report.RunNotes
	if notes.Warnings, err = db.RunWarnings(ctx, run.ID); err != nil {
		return nil, none, fmt.Errorf("loading the warnings of run %d from %s: %w", run.ID, path, err)
	}
	if notes.Browser, err = db.RunBrowser(ctx, run.ID); err != nil {
		return nil, none, fmt.Errorf("loading the browser of run %d from %s: %w", run.ID, path, err)
	}
	return ds, notes, nil
}

// runsHint lists the runs a database holds, for an error message.
func runsHint(ctx context.Context, db *store.DB) string {
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) == 0 {
		return "the database holds no run yet: quicbench run writes one"
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = fmt.Sprintf("%d (%s)", r.ID, r.PlanName)
	}
	return "runs in this database: " + strings.Join(ids, ", ")
}

// writeOutput writes a file atomically (a temporary file renamed into
// place, so a failed report never leaves half a file) and prints its path;
// "-" writes to standard output.
func writeOutput(env *Env, path string, write func(io.Writer) error) error {
	if path == "-" {
		return write(env.Stdout)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return Usage(fmt.Errorf("cannot write %s: %w", path, err), "choose a writable output path with -o")
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintln(env.Stdout, path)
	return nil
}

// exactArgs returns a check that a command got n arguments; otherwise it
// returns a usage error that says what the command takes (want, such as
// "report takes one results database"), how many it got, and hint.
func exactArgs(n int, want, hint string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return Usage(fmt.Errorf("%s, got %d arguments", want, len(args)), hint)
		}
		return nil
	}
}

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/report"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

func init() { Register("run", newRunCmd) }

// loadPlan resolves --plan: a built-in plan name or a YAML file.
func loadPlan(nameOrPath string) (*plan.Plan, error) {
	for _, n := range plan.BuiltinNames() {
		if n == nameOrPath {
			return plan.Builtin(n)
		}
	}
	if _, err := os.Stat(nameOrPath); err != nil {
		return nil, Usage(fmt.Errorf("plan %q is neither a built-in plan (%s) nor a readable file", nameOrPath, strings.Join(plan.BuiltinNames(), ", ")),
			"list the built-in plans with: quicbench plans")
	}
	p, err := plan.Load(nameOrPath)
	if err != nil {
		return nil, Usage(err, "the plan format is described in docs/plan-format.md")
	}
	return p, nil
}

func newRunCmd(env *Env) *cobra.Command {
	var (
		planArg, out, resume, reportPath, keylog, qlog   string
		quick, quiet, jsonl, lines, noReport, quicEvents bool
		seed                                             uint64
		maxSamples                                       int
	)
	cmd := &cobra.Command{
		Use:   "run --plan NAME|FILE [-o results.db]",
		Short: "Run a plan: measure every cell, store every sample, write a report",
		Long: `Run a plan over an emulated network and store every sample in a SQLite database.

The plan is a built-in plan name (see quicbench plans) or a YAML file. Every sample is stored
the moment it is taken: an interrupted run (Ctrl-C, crash, power loss) loses at most the sample
in flight, and quicbench run --resume results.db continues it exactly where it stopped.
At the end a terminal summary is printed and an HTML report is written next to the database.`,
		Example: `  quicbench run --plan quick
  quicbench run --plan degraded-networks --quick -o a.db
  quicbench run --plan my-plan.yaml -o my.db --report my.html
  quicbench run --resume my.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return &ExitError{Code: ExitEnv, Err: errors.New("quicbench run needs root to create network namespaces"), Hint: "run it as root (sudo); quicbench doctor explains what is available"}
			}
			opts := runner.Options{Exe: env.Exe, Progress: env.Stderr, Log: env.Stderr, KeyLogDir: keylog, QlogDir: qlog, MaxSamples: maxSamples, QUICEvents: quicEvents}
			switch {
			case quiet:
				opts.Mode = runner.ProgressQuiet
			case jsonl:
				opts.Mode, opts.Progress = runner.ProgressJSON, env.Stdout
			case lines:
				opts.Mode = runner.ProgressLines
			default:
				opts.Mode = runner.ProgressBar
				if f, ok := env.Stderr.(*os.File); !ok || !isTerminal(f) {
					opts.Mode = runner.ProgressLines
				}
			}
			if resume != "" {
				if planArg != "" || quick || cmd.Flags().Changed("seed") {
					return Usage(errors.New("--resume continues the stored plan: do not give --plan, --quick or --seed"), "")
				}
				opts.Resume, opts.DB = true, resume
			} else {
				if planArg == "" {
					return Usage(errors.New("no plan: give --plan NAME|FILE (or --resume DB)"), "quicbench run --plan quick runs the built-in first look")
				}
				p, err := loadPlan(planArg)
				if err != nil {
					return err
				}
				if quick {
					if p, err = p.Quick(); err != nil {
						return Usage(err, "")
					}
				}
				if cmd.Flags().Changed("seed") {
					p.Seed = seed
				}
				opts.Plan = p
				if out == "" {
					out = p.Name + ".db"
				}
				opts.DB = out
			}
			sum, err := runner.Run(cmd.Context(), opts)
			if sum != nil {
				printRunSummary(env, opts.DB, sum)
			}
			if err != nil {
				if errors.Is(err, runner.ErrInterrupted) {
					return &ExitError{Code: ExitSignal, Err: err, Hint: "continue with: quicbench run --resume " + opts.DB}
				}
				return err
			}
			if jsonl || noReport {
				return nil
			}
			if reportPath == "" {
				reportPath = strings.TrimSuffix(opts.DB, filepath.Ext(opts.DB)) + ".html"
			}
			return writeReports(env, opts.DB, sum.RunID, reportPath, !quiet)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&planArg, "plan", "p", "", "built-in plan name or plan file (YAML)")
	f.BoolVar(&quick, "quick", false, "run the plan's quick variant (fewer iterations and grid points, every test kept)")
	f.StringVarP(&out, "out", "o", "", "database to create (default: PLAN.db)")
	f.StringVar(&resume, "resume", "", "continue the interrupted run stored in this database")
	f.Uint64Var(&seed, "seed", 0, "run seed (overrides the plan's)")
	f.StringVar(&reportPath, "report", "", "HTML report to write at the end (default: the database name with .html)")
	f.BoolVar(&noReport, "no-report", false, "do not write the HTML report or print the summary")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	f.BoolVar(&jsonl, "jsonl", false, "progress as JSON lines on stdout (for scripts)")
	f.BoolVar(&lines, "lines", false, "progress as one plain line per sample")
	f.StringVar(&keylog, "keylog", "", "directory for the server's TLS key log (SSLKEYLOGFILE format)")
	f.StringVar(&qlog, "qlog", "", "directory for the server's qlog files")
	f.BoolVar(&quicEvents, "quic-events", false, "record quic-go's per-packet events (QUIC PTO counts, congestion events, retransmissions) at a CPU cost for QUIC")
	f.IntVar(&maxSamples, "max-samples", 0, "stop after this many samples (the run stays resumable)")
	_ = f.MarkHidden("max-samples")
	return cmd
}

func printRunSummary(env *Env, db string, s *runner.Summary) {
	state := "complete"
	if !s.Complete {
		state = "incomplete (resume with: quicbench run --resume " + db + ")"
	}
	fmt.Fprintf(env.Stderr, "\nrun %d %s: %d/%d samples stored (%d taken now, %d failed, %d invalid, %d warnings) in %s\n",
		s.RunID, state, s.Resumed+s.Taken, s.Planned, s.Taken, s.Failed, s.Invalid, s.Warnings, s.Elapsed.Round(1e8))
	if s.Taken > 0 {
		fmt.Fprintf(env.Stderr, "per-sample overhead (outside the measured transfer): p50 %s, p95 %s, max %s\n",
			s.OverheadP50.Round(1e4), s.OverheadP95.Round(1e4), s.OverheadMax.Round(1e4))
	}
}

// writeReports prints the terminal summary and writes the HTML report.
func writeReports(env *Env, dbPath string, runID int64, htmlPath string, text bool) error {
	db, err := store.OpenExisting(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	ds, err := db.LoadDataset(context0(), runID)
	if err != nil {
		return err
	}
	opts := report.Options{Source: dbPath}
	if text {
		if err := report.Text(env.Stdout, ds, opts); err != nil {
			return err
		}
	}
	f, err := os.Create(htmlPath)
	if err != nil {
		return err
	}
	if err := report.HTML(f, ds, opts); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "report: %s\n", htmlPath)
	return nil
}

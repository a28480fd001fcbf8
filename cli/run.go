package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/peers"
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

// captureFlags reads run's --capture, --capture-snap and --capture-limit.
func captureFlags(kinds, snap, limit string) (plan.CaptureSpec, error) {
	var c plan.CaptureSpec
	var err error
	if kinds != "" {
		if c.Kinds, err = plan.ParseCaptureKinds(kinds); err != nil {
			return c, Usage(fmt.Errorf("--capture: %w", err), "--capture pcap keeps a pcapng of every sample")
		}
	}
	if snap != "" {
		if c.Snap, err = plan.ParseSnap(snap); err != nil {
			return c, Usage(fmt.Errorf("--capture-snap: %w", err), "")
		}
	}
	if limit != "" {
		if c.Limit, err = plan.ParseCaptureLimit(limit); err != nil {
			return c, Usage(fmt.Errorf("--capture-limit: %w", err), "")
		}
	}
	return c, nil
}

func newRunCmd(env *Env) *cobra.Command {
	var (
		planArg, out, resume, reportPath, keylog, qlog   string
		quick, quiet, jsonl, lines, noReport, quicEvents bool
		seed                                             uint64
		maxSamples, maxIter, parallel                    int
		precision, shardArg, minEffect, stacksFile       string
		allowCommands                                    bool
		captureArg, captureSnap, captureLimit            string
	)
	cmd := &cobra.Command{
		Use:   "run --plan NAME|FILE [-o results.db]",
		Short: "Run a plan: measure every cell, store every sample, write a report",
		Long: `Run a plan over an emulated network and store every sample in a SQLite database.

The plan is a built-in plan name (see quicbench plans) or a YAML file. Every sample is stored
the moment it is taken: an interrupted run (Ctrl-C, crash, power loss) loses at most the sample
in flight, and quicbench run --resume results.db continues it exactly where it stopped.
With --parallel N, up to N testbeds take samples at once, each a whole iteration of a cell
group (its protocols, paired, on one testbed); a block starts only while the machine's
predicted load stays within its budget, and CPU-heavy cells (unlimited links, the cpu test,
browsers) run alone (docs/plan-format.md, "Parallel testbeds").
With --shard K/N, the run takes only shard K of N of the plan: whole blocks, balanced by
estimated duration, with the pairing and seeds of the whole run; run the N shards anywhere
(one database each) and combine them with quicbench merge (docs/architecture.md, "Shards").
At the end a terminal summary is printed and an HTML report is written next to the database.`,
		Example: `  quicbench run --plan quick
  quicbench run --plan degraded-networks --quick -o a.db
  quicbench run --plan my-plan.yaml -o my.db --report my.html
  quicbench run --plan page-load-grid --parallel 16
  quicbench run --resume my.db --parallel 4
  quicbench run --plan degraded-networks --shard 3/16 -o shard-3.db
  quicbench run --plan quick --capture --capture-snap whole   # a pcapng per sample (quicbench evidence)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var shard plan.Shard
			if shardArg != "" {
				var err error
				if shard, err = plan.ParseShard(shardArg); err != nil {
					return Usage(fmt.Errorf("--shard: %w", err), "quicbench run --plan P --shard K/N runs shard K (1..N) of N")
				}
			}
			if handled, err := runReexec(cmd, env); handled {
				return err
			}
			if parallel < 0 || parallel > plan.MaxParallelSetting {
				return Usage(fmt.Errorf("--parallel %d: want 1..%d testbeds at once (0: the plan's parallel, else 1)", parallel, plan.MaxParallelSetting), "")
			}
			opts := runner.Options{Exe: env.Exe, Progress: env.Stderr, Log: env.Stderr, KeyLogDir: keylog, QlogDir: qlog, MaxSamples: maxSamples, QUICEvents: quicEvents, Parallel: parallel, Shard: shard, AllowCommands: allowCommands}
			var userStacks []*peers.Stack
			if stacksFile != "" {
				// the user names the file: its commands may run
				var err error
				if userStacks, err = plan.LoadStacks(stacksFile); err != nil {
					return Usage(fmt.Errorf("--stacks: %w", err), "a YAML list of stacks: name, command, roles, protocols (docs/plan-format.md, \"Stacks of your own\")")
				}
				opts.AllowCommands = true
			}
			var err error
			if opts.Capture, err = captureFlags(captureArg, captureSnap, captureLimit); err != nil {
				return err
			}
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
			if minEffect != "" {
				// checked now, not after the run
				if _, err := parseMinEffect(minEffect); err != nil {
					return err
				}
			}
			if resume != "" {
				if planArg != "" || quick || cmd.Flags().Changed("seed") || precision != "" || maxIter != 0 || stacksFile != "" {
					return Usage(errors.New("--resume continues the stored plan: do not give --plan, --quick, --seed, --precision, --max-iterations or --stacks"), "the stored plan's stacks run again with --allow-commands")
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
				if len(userStacks) > 0 {
					if cmds := peers.Commands(p.Stacks()); len(cmds) > 0 && !allowCommands {
						return Usage(fmt.Errorf("the plan declares stacks of its own too (%s): --stacks allows only its file's commands", strings.Join(cmds, "; ")), "add --allow-commands if you trust the plan's")
					}
					if p, err = p.WithStacks(userStacks); err != nil {
						return Usage(err, "")
					}
				}
				if quick {
					if p, err = p.Quick(); err != nil {
						return Usage(err, "")
					}
				}
				if cmd.Flags().Changed("seed") {
					p.Seed = seed
				}
				if precision != "" || maxIter != 0 {
					if p, err = withPrecision(p, precision, maxIter); err != nil {
						return err
					}
				}
				if !shard.IsZero() && p.Precision() > 0 {
					return Usage(fmt.Errorf("--shard %s: the plan has a precision target (adaptive iterations), whose stopping rule needs all of a group's iterations in one run", shard),
						"run it whole, or with fixed iterations: --precision 0")
				}
				opts.Plan = p
				if out == "" {
					out = p.Name + ".db"
				}
				opts.DB = out
			}
			sum, err := runPlan(cmd.Context(), opts)
			return finishRun(env, opts.DB, sum, err, finishFlags{report: reportPath, noReport: noReport, jsonl: jsonl, quiet: quiet, minEffect: minEffect})
		},
	}
	outputFlag(cmd, &out, "database to create (default: PLAN.db)")
	f := cmd.Flags()
	f.StringVarP(&planArg, "plan", "p", "", "built-in plan name or plan file (YAML)")
	f.BoolVar(&quick, "quick", false, "run the plan's quick variant (fewer iterations and grid points, every test kept)")
	f.StringVar(&resume, "resume", "", "continue the interrupted run stored in this database")
	f.Uint64Var(&seed, "seed", 0, "run seed (overrides the plan's)")
	f.StringVar(&precision, "precision", "", "adaptive iterations: iterate each group until every protocol pair's 95% CI of the paired median difference is within ±P% of the median, e.g. 5% (overrides the plan's precision; 0 turns it off)")
	f.IntVar(&maxIter, "max-iterations", 0, "adaptive iterations: the most iterations a group takes (default: the plan's max_iterations, or 10 x its iterations)")
	f.StringVar(&minEffect, "min-effect", "", minEffectHelp)
	f.StringVar(&reportPath, "report", "", "HTML report to write at the end (default: the database name with .html; - for standard output)")
	f.BoolVar(&noReport, "no-report", false, "do not write the HTML report or print the summary")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	f.BoolVar(&jsonl, "jsonl", false, "progress as JSON lines on stdout (for scripts)")
	f.BoolVar(&lines, "lines", false, "progress as one plain line per sample")
	f.StringVar(&keylog, "keylog", "", "directory for the server's TLS key log (SSLKEYLOGFILE format)")
	f.StringVar(&qlog, "qlog", "", "directory for the server's qlog files (each sample also keeps its connections' qlogs: quicbench evidence)")
	f.StringVar(&captureArg, "capture", "", "keep per sample: pcap, the emulator's packets as pcapng with the connections' TLS secrets embedded; har, a browser page load's HAR; a comma-separated list (--capture alone means pcap; adds to the plan's capture)")
	f.Lookup("capture").NoOptDefVal = plan.CapturePcap
	f.StringVar(&captureSnap, "capture-snap", "", "bytes kept of each captured packet: headers (128, the default), whole, or a count")
	f.StringVar(&captureLimit, "capture-limit", "", "the most the run's captures hold, e.g. 2GB (default 1GB); later samples' captures hold no packets")
	f.BoolVar(&quicEvents, "quic-events", false, "record quic-go's per-packet events (QUIC PTO counts, congestion events, retransmissions) at a CPU cost for QUIC")
	f.IntVar(&parallel, "parallel", 0, fmt.Sprintf("testbeds taking samples at once (default: the plan's parallel, else 1; at most %d per CPU, within the memory and open files the machine has; the admission rule decides how many run at once); a resumed run may use another", plan.MaxParallelPerCPU))
	f.BoolVar(&allowCommands, "allow-commands", false, "run the commands of the contract stacks the plan declares (stacks:): they run as root, so only a plan you trust (quicbench plans validate lists them)")
	f.StringVar(&stacksFile, "stacks", "", "a local file of contract stacks (a YAML list: name, command, roles, protocols) the plan may choose as server: or client:; naming it allows their commands")
	f.StringVar(&shardArg, "shard", "", "run only shard K of N of the plan (K/N, e.g. 3/16; merge the shards' databases with quicbench merge)")
	f.IntVar(&maxSamples, "max-samples", 0, "stop after this many samples (the run stays resumable)")
	_ = f.MarkHidden("max-samples")
	return cmd
}

// finishFlags are the run command's flags that decide what is printed and
// written once the runner returns.
type finishFlags struct {
	report          string // --report ("" for the default beside the database)
	noReport, jsonl bool   // --no-report, --jsonl
	quiet           bool   // --quiet
	minEffect       string // --min-effect ("" for the plan's, else the default)
}

// finishRun reports the outcome of runner.Run (sum and err) on db: the run
// summary on stderr and the terminal summary and HTML report, unless
// --no-report (none of them) or --jsonl (the summary line only, stdout
// carries the progress records).
func finishRun(env *Env, db string, sum *runner.Summary, err error, f finishFlags) error {
	path := f.report
	if path == "" {
		path = strings.TrimSuffix(db, filepath.Ext(db)) + ".html"
	}
	// The terminal summary goes to stdout, unless the HTML does; it opens
	// with the per-sample overheads, which the run summary then leaves out.
	text := err == nil && !f.jsonl && !f.noReport && !f.quiet && path != "-"
	if sum != nil && !f.noReport {
		printRunSummary(env, db, sum, !text)
	}
	if err != nil {
		if errors.Is(err, runner.ErrInterrupted) {
			return &ExitError{Code: ExitSignal, Err: err, Hint: "continue with: quicbench run --resume " + db}
		}
		return err
	}
	if f.jsonl || f.noReport {
		return nil
	}
	return writeReports(env, db, sum.RunID, path, text, f.minEffect)
}

// printRunSummary prints the outcome of a run on stderr, and with overhead
// the per-sample overhead of each client (left out when the terminal
// summary follows, which opens with it).
func printRunSummary(env *Env, db string, s *runner.Summary, overhead bool) {
	state := "complete"
	if !s.Complete {
		state = "incomplete (resume with: quicbench run --resume " + db + ")"
	}
	if !s.Shard.IsZero() {
		state = fmt.Sprintf("shard %s %s", s.Shard, state)
	}
	fmt.Fprintf(env.Stderr, "\nrun %d %s: %d/%d samples stored (%d taken now, %d failed, %d invalid, %d warnings) in %s\n",
		s.RunID, state, s.Resumed+s.Taken, s.Planned, s.Taken, s.Failed, s.Invalid, s.Warnings, s.Elapsed.Round(1e8))
	if !overhead {
		return
	}
	for _, o := range s.Overheads {
		fmt.Fprintf(env.Stderr, "per-sample overhead outside the measured part, %s (p50 / p95 / max): %s\n", o.Client, o.Total)
		for _, p := range o.Parts() {
			fmt.Fprintf(env.Stderr, "  of which %s: %s\n", p.Label, p.Of(o))
		}
	}
}

// writeReports prints the terminal summary (if text) and writes the HTML
// report atomically ("-": to stdout), with the run-level warnings and the
// browser version as quicbench report shows them, judging differences by
// minEffect (--min-effect as given, else the plan's min_effect).
func writeReports(env *Env, dbPath string, runID int64, htmlPath string, text bool, minEffect string) error {
	db, err := store.OpenReadOnly(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context0()
	ds, err := db.LoadDataset(ctx, runID)
	if err != nil {
		return err
	}
	warns, err := db.RunWarnings(ctx, runID)
	if err != nil {
		return fmt.Errorf("loading the warnings of run %d from %s: %w", runID, dbPath, err)
	}
	browser, err := db.RunBrowser(ctx, runID)
	if err != nil {
		return err
	}
	opts := report.Options{Source: dbPath, RunWarnings: warns, Browser: browser}
	ev, err := runEvidence(ctx, db, runID)
	if err != nil {
		return fmt.Errorf("listing the evidence of run %d in %s: %w", runID, dbPath, err)
	}
	withEvidence(&opts, ev, dbPath, htmlPath, runID)
	if opts.Stats.MinEffect, err = minEffectFor(minEffect, ds.Run.PlanText); err != nil {
		return err
	}
	if text {
		if err := report.Text(env.Stdout, ds, opts); err != nil {
			return err
		}
	}
	err = writeOutput(env, htmlPath, func(w io.Writer) error { return report.HTML(w, ds, opts) })
	if ee := (*ExitError)(nil); errors.As(err, &ee) && ee.Code == ExitUsage {
		// The run is stored; only the report path was not writable (and
		// -o names the database here).
		ee.Hint = "the run is stored; write its report elsewhere with: quicbench report " + dbPath + " -o FILE"
	}
	return err
}

// withPrecision applies --precision and --max-iterations to p.
func withPrecision(p *plan.Plan, precision string, maxIter int) (*plan.Plan, error) {
	pct := p.Precision()
	if precision != "" {
		num, _ := strings.CutSuffix(strings.TrimSpace(precision), "%")
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v < 0 || v > 100 {
			return nil, Usage(fmt.Errorf("--precision %q: want a percentage from 0%% (off) to 100%%, e.g. 5%%", precision), "")
		}
		pct = v
	}
	if maxIter != 0 && pct == 0 {
		return nil, Usage(errors.New("--max-iterations needs a precision target (--precision, or the plan's precision)"), "")
	}
	if maxIter < 0 || maxIter > plan.MaxIterations {
		return nil, Usage(fmt.Errorf("--max-iterations %d: want 2..%d", maxIter, plan.MaxIterations), "")
	}
	q, err := p.WithPrecision(pct, maxIter)
	if err != nil {
		return nil, Usage(err, "")
	}
	return q, nil
}

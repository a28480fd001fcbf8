package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/quicbench/quicbench/parcheck"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

func init() { Register("check-parallel", newCheckParallelCmd) }

// defaultCheckParallel is check-parallel's --parallel when neither the
// flag nor the plan's parallel field says otherwise.
const defaultCheckParallel = 4

// The files check-parallel writes in its directory.
const (
	checkSerialDB   = "serial.db"
	checkParallelDB = "parallel.db"
	checkText       = "check.txt"
)

func newCheckParallelCmd(env *Env) *cobra.Command {
	var (
		planArg, out       string
		parallel, iters    int
		resume, asJSON, qt bool
		minEffect          string
	)
	cmd := &cobra.Command{
		Use:   "check-parallel [--plan NAME|FILE] [--parallel N] [-o DIR]",
		Short: "Show that running testbeds in parallel does not change the answer",
		Long: `Runs a plan twice, one testbed at a time (DIR/serial.db) and up to N testbeds at
once (DIR/parallel.db, quicbench run --parallel N), and compares the two runs cell by
cell. The same iteration of a cell meets the same emulator seed in both runs, so the
samples pair up; per cell it prints the number of valid pairs, both medians, the shift
of the medians, the Hodges-Lehmann estimate of the paired difference with its 95%
interval (in % of the serial median), the Wilcoxon signed-rank p-value, Holm-adjusted
over the cells, the most testbeds that ran at once, and a verdict by the report's rule
of practical significance: "moved" when the adjusted p-value is below 0.05 and the
interval lies wholly outside the smallest effect of interest (--min-effect, else the
plan's min_effect, else ±5%), "same" otherwise, "too few pairs" under 6 pairs. The comparison is also written to DIR/check.txt
(Markdown).

The default plan is the built-in parallel-check (link-bound page loads, about 11
minutes per run on 2 cores). An interrupted check continues with --resume, which
resumes an incomplete database and reuses a complete one.

Exit status: 0 when every cell is "same"; 1 when a cell moved, or when cells have too
few pairs to decide.`,
		Example: `  quicbench check-parallel --parallel 4 -o check
  quicbench check-parallel --resume -o check
  quicbench check-parallel --plan my-plan.yaml --iterations 30 --json`,
		Args: exactArgs(0, "check-parallel takes no arguments", "give the plan with --plan"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := loadPlan(planArg)
			if err != nil {
				return err
			}
			band := planMinEffect(p)
			if minEffect != "" {
				v, err := parseMinEffect(minEffect)
				if err != nil {
					return err
				}
				band = statsMinEffect(v)
			}
			if cmd.Flags().Changed("iterations") {
				if iters < 2 || iters > plan.MaxIterations {
					return Usage(fmt.Errorf("--iterations %d: want 2..%d (%d or more for a verdict)", iters, plan.MaxIterations, parcheck.Default().MinPairs), "")
				}
				if p, err = withIterations(p, iters); err != nil {
					return Usage(err, "")
				}
			}
			if p.Precision() > 0 {
				// The check compares fixed iterations: an adaptive stop
				// would depend on the values of each run.
				if p, err = p.WithPrecision(0, 0); err != nil {
					return Usage(err, "")
				}
			}
			if !cmd.Flags().Changed("parallel") {
				parallel = defaultCheckParallel
				if p.Parallel() >= 2 {
					parallel = p.Parallel()
				}
			}
			if parallel < 2 || parallel > plan.MaxParallelSetting {
				return Usage(fmt.Errorf("--parallel %d: want 2..%d testbeds at once (1 would compare two serial runs)", parallel, plan.MaxParallelSetting), "")
			}
			if out == "" {
				out = "check-" + p.Name
			}
			if os.Geteuid() != 0 {
				return &ExitError{Code: ExitEnv, Err: errors.New("quicbench check-parallel needs root to create network namespaces"), Hint: "run it as root (sudo); quicbench doctor explains what is available"}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return Usage(fmt.Errorf("output directory: %w", err), "")
			}
			mode := runner.ProgressBar
			if f, ok := env.Stderr.(*os.File); !ok || !isTerminal(f) {
				mode = runner.ProgressLines
			}
			if qt {
				mode = runner.ProgressQuiet
			}
			serial := filepath.Join(out, checkSerialDB)
			par := filepath.Join(out, checkParallelDB)
			for _, r := range []struct {
				what, db string
				n        int
			}{
				{"serial run, one testbed at a time", serial, 1},
				{fmt.Sprintf("parallel run, up to %d testbeds at once", parallel), par, parallel},
			} {
				opts := runner.Options{Plan: p, DB: r.db, Parallel: r.n, Exe: env.Exe, Progress: env.Stderr, Mode: mode, Log: env.Stderr}
				if err := checkRun(cmd.Context(), env, r.what, opts, resume, out); err != nil {
					return err
				}
			}
			return compareCheck(cmd.Context(), env, p.Name, serial, par, parallel, filepath.Join(out, checkText), asJSON, band)
		},
	}
	outputFlag(cmd, &out, "directory of the two runs and check.txt (default: check-PLAN)")
	f := cmd.Flags()
	f.StringVarP(&planArg, "plan", "p", "parallel-check", "built-in plan name or plan file (YAML)")
	f.IntVar(&parallel, "parallel", 0, "testbeds at once in the parallel run (default: the plan's parallel field, else 4)")
	f.IntVar(&iters, "iterations", 0, "iterations of every cell (overrides the plan's)")
	f.BoolVar(&resume, "resume", false, "continue the check in -o DIR: resume an incomplete run, reuse a complete one")
	f.BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	f.BoolVarP(&qt, "quiet", "q", false, "no progress output")
	f.StringVar(&minEffect, "min-effect", "", "smallest shift of interest, e.g. 5%: a cell moved only when its shift is significant and its 95% interval lies wholly outside ± this share of the serial median (default: the plan's min_effect, else 5%; 0% turns the band off)")
	return cmd
}

// checkRun takes one of the two runs into opts.DB: a new run, or with
// resume the continuation of an incomplete run of the same plan, or
// nothing when that run is complete.
func checkRun(ctx context.Context, env *Env, what string, opts runner.Options, resume bool, dir string) error {
	hint := fmt.Sprintf("continue the check with: quicbench check-parallel --resume -o %s (and the same --plan, --iterations)", dir)
	if _, err := os.Stat(opts.DB); err == nil {
		if !resume {
			return Usage(fmt.Errorf("%s already exists", opts.DB), "continue that check with --resume, or choose another directory with -o")
		}
		complete, err := storedRunState(ctx, opts.DB, opts.Plan)
		if err != nil {
			return err
		}
		if complete {
			fmt.Fprintf(env.Stderr, "%s: reusing the complete %s\n", what, opts.DB)
			return nil
		}
		opts.Resume = true
		fmt.Fprintf(env.Stderr, "%s: resuming %s\n", what, opts.DB)
	} else {
		fmt.Fprintf(env.Stderr, "%s: %s\n", what, opts.DB)
	}
	sum, err := runner.Run(ctx, opts)
	if sum != nil {
		printRunSummary(env, opts.DB, sum, true)
	}
	switch {
	case errors.Is(err, runner.ErrInterrupted):
		return &ExitError{Code: ExitSignal, Err: err, Hint: hint}
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case !sum.Complete:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s stopped before it was complete", what), Hint: hint}
	}
	return nil
}

// storedRunState reports whether the latest run of db is complete, after
// checking that it is a run of p.
func storedRunState(ctx context.Context, db string, p *plan.Plan) (complete bool, err error) {
	s, err := store.OpenReadOnly(db)
	if err != nil {
		return false, Usage(err, "give check-parallel a directory of its own with -o")
	}
	defer s.Close()
	rec, err := s.LatestRun(ctx)
	if err != nil {
		return false, Usage(fmt.Errorf("%s: %w", db, err), "give check-parallel a directory of its own with -o")
	}
	if rec.PlanHash != p.Hash() {
		return false, Usage(fmt.Errorf("%s holds a run of another plan (%s, hash %.12s; this check's plan %s has hash %.12s)", db, rec.PlanName, rec.PlanHash, p.Name, p.Hash()),
			"resume with the --plan and --iterations the check was started with, or choose another directory with -o")
	}
	return rec.Status == "complete", nil
}

// compareCheck loads the two runs, prints their comparison (text or JSON),
// writes it to textPath and returns the check's exit status as an error.
func compareCheck(ctx context.Context, env *Env, planName, serial, par string, n int, textPath string, asJSON bool, minEffect float64) error {
	sd, _, err := loadRun(ctx, serial, 0)
	if err != nil {
		return err
	}
	pd, _, err := loadRun(ctx, par, 0)
	if err != nil {
		return err
	}
	res, err := parcheck.Compare(sd, pd, parcheck.Config{MinEffect: minEffect})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	src := parcheck.Source{Plan: planName, Serial: filepath.Base(serial), Parallel: filepath.Base(par), N: n}
	silent := *env // writeOutput prints the path; stdout may carry JSON
	silent.Stdout = io.Discard
	if err := writeOutput(&silent, textPath, func(w io.Writer) error { return res.WriteMarkdown(w, src) }); err != nil {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s\n", b)
	} else {
		if err := res.WriteText(env.Stdout); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "comparison written to %s\n", textPath)
	}
	switch res.Verdict {
	case parcheck.Moved:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("parallel changed the answer in %d of %d cells", res.Moved, len(res.Cells)),
			Hint: "see " + textPath + "; run with a smaller --parallel, or look at the moved cells' samples (quicbench report)"}
	case parcheck.TooFew:
		return &ExitError{Code: ExitFailure, Err: errors.New(res.Summary()),
			Hint: "run more iterations (--iterations, with a new -o) or find why samples failed (quicbench report)"}
	}
	return nil
}

// withIterations returns p with k iterations for every cell: the top-level
// iterations set to k and every test's own iterations removed.
func withIterations(p *plan.Plan, k int) (*plan.Plan, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(p.YAML(), &doc); err != nil {
		return nil, fmt.Errorf("plan %s: %w", p.Name, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("plan %s: not a mapping", p.Name)
	}
	top := doc.Content[0]
	setKey(top, "iterations", strconv.Itoa(k))
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "tests" || top.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for _, t := range top.Content[i+1].Content {
			if t.Kind == yaml.MappingNode {
				deleteKey(t, "iterations")
			}
		}
	}
	text, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	q, err := plan.Parse(p.Name+".yaml", text)
	if err != nil {
		return nil, fmt.Errorf("plan %s with %d iterations: %w", p.Name, k, err)
	}
	q.Seed = p.Seed
	return q, nil
}

// setKey sets key to the scalar value in the mapping m, adding it after
// the name (or first) when absent.
func setKey(m *yaml.Node, key, value string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: value}
			return
		}
	}
	kv := []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, {Kind: yaml.ScalarNode, Tag: "!!int", Value: value}}
	m.Content = append(kv, m.Content...)
}

// deleteKey removes key from the mapping m.
func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

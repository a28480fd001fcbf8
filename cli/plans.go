package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

func init() { Register("plans", newPlansCommand) }

func newPlansCommand(env *Env) *cobra.Command {
	var quick bool
	var parallel int
	cmd := &cobra.Command{
		Use:   "plans [NAME]",
		Short: "List the built-in plans, or print one as YAML to copy and edit",
		Long: `Without an argument, lists the built-in plans with their cell and sample
counts (samples include one warm-up per cell; QUICK is the sample count of the
--quick variant), ESTIMATE, the estimated duration of a full run on the
reference machine taking one sample at a time (a 2-core VM; an order of
magnitude, see "Estimated duration" in docs/plan-format.md), and PARALLEL, the
estimate of a run with quicbench run --parallel N on that machine, N = 16 by
default (the most testbeds the admission rule keeps active on 2 CPUs; see
"Parallel testbeds" in docs/plan-format.md), or --parallel N. With a NAME,
prints that plan as YAML, with both estimates in a first comment line and the
comments that explain its design: save it, edit it and run it with quicbench
run --plan FILE. The plan format is described in docs/plan-format.md.`,
		Example: `  quicbench plans
  quicbench plans --parallel 4
  quicbench plans page-load-grid > my-grid.yaml
  quicbench plans degraded-networks --quick
  quicbench plans validate my-grid.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkParallel(parallel); err != nil {
				return err
			}
			if len(args) == 0 {
				return listPlans(env.Stdout, parallel)
			}
			data, err := plan.BuiltinYAML(args[0])
			if err != nil {
				return Usage(err, "quicbench plans lists them; for a plan file use quicbench plans validate FILE")
			}
			p, err := plan.Builtin(args[0])
			if err != nil {
				return err
			}
			if quick {
				if p, err = p.Quick(); err != nil {
					return err
				}
				data = p.YAML()
			}
			e, err := p.EstimateWith(parallelFor(p, parallel, cmd.Flags().Changed("parallel")))
			if err != nil {
				return err
			}
			// A comment: the output stays the plan, valid YAML that parses
			// to the same plan.
			if _, err := fmt.Fprintf(env.Stdout, "# estimated duration on the reference machine: %s (%d samples)%s\n",
				plan.FormatEstimate(e.Total), p.Counts().Total(), parallelPart(e)); err != nil {
				return err
			}
			_, err = env.Stdout.Write(data)
			return err
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "print the plan's quick variant (fewer iterations, scenarios and values; every test kept)")
	cmd.PersistentFlags().IntVar(&parallel, "parallel", plan.MaxParallel(plan.RefCores),
		fmt.Sprintf("estimate a run with up to N testbeds at once (1..%d; the reference machine runs at most %d; validate: the plan's parallel field unless set)",
			plan.MaxParallelSetting, plan.MaxParallel(plan.RefCores)))
	cmd.AddCommand(newPlansValidateCommand(env, &parallel))
	return cmd
}

// checkParallel checks the value of the plans command's --parallel flag.
func checkParallel(n int) error {
	if n < 1 || n > plan.MaxParallelSetting {
		return Usage(fmt.Errorf("--parallel %d: the testbeds at once must be 1..%d", n, plan.MaxParallelSetting),
			fmt.Sprintf("--parallel 1 estimates a run of one sample at a time; the reference machine runs at most %d", plan.MaxParallel(plan.RefCores)))
	}
	return nil
}

// parallelFor returns the testbeds at once to estimate plan p with: the
// --parallel flag when set on the command line, else the plan's parallel
// field, else the flag's default.
func parallelFor(p *plan.Plan, flag int, changed bool) int {
	if !changed && p.Parallel() > 0 {
		return p.Parallel()
	}
	return flag
}

// parallelPart is what a line of an estimate adds for the parallel
// figure: ", 2h33m with 16 testbeds at once", or nothing for one testbed.
func parallelPart(e plan.Estimate) string {
	if e.ParallelN <= 1 {
		return ""
	}
	return fmt.Sprintf(", %s with %d testbeds at once", plan.FormatEstimate(e.Parallel), e.ParallelN)
}

func listPlans(w io.Writer, parallel int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCELLS\tSAMPLES\tQUICK\tESTIMATE\tPARALLEL\tDESCRIPTION")
	for _, info := range plan.Builtins() {
		p, err := plan.Builtin(info.Name)
		if err != nil {
			return fmt.Errorf("built-in plan %s: %w", info.Name, err)
		}
		q, err := p.Quick()
		if err != nil {
			return err
		}
		e, err := p.EstimateWith(parallel)
		if err != nil {
			return fmt.Errorf("built-in plan %s: %w", info.Name, err)
		}
		c := p.Counts()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", info.Name, c.Cells, c.Total(), q.Counts().Total(),
			plan.FormatEstimate(e.Total), plan.FormatEstimate(e.Parallel), info.Description)
	}
	return tw.Flush()
}

func newPlansValidateCommand(env *Env, parallel *int) *cobra.Command {
	var cells, quick bool
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check plan files and show what they expand to",
		Long: `Parses each plan file, reports every problem with its file:line:col, the
field, the bad value and what is allowed (exit code 2), or prints what the plan
expands to: scenarios, cells and samples, and the notes about combinations it
leaves out on purpose (for example a raw transport listed for a page test),
and the estimated duration of a run taking one sample at a time and of one
with parallel testbeds: the plan's parallel field, or --parallel N (default
16, the most the reference machine runs). A built-in plan's name is accepted
in place of a file. It lists the commands of the stacks a plan declares
(stacks:), which a run executes only with --allow-commands.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkParallel(*parallel); err != nil {
				return err
			}
			var bad []string
			for _, arg := range args {
				p, err := loadPlanArg(arg)
				if err == nil && quick {
					p, err = p.Quick()
				}
				if err != nil {
					fmt.Fprintln(env.Stderr, err)
					bad = append(bad, arg)
					continue
				}
				c := p.Counts()
				fmt.Fprintf(env.Stdout, "%s: ok: plan %q, %s, %s, %d samples (%d counted + %d warm-up)\n",
					arg, p.Name, plural(len(p.Scenarios()), "scenario"), plural(c.Cells, "cell"), c.Total(), c.Samples, c.Warmups)
				if e, err := p.EstimateWith(parallelFor(p, *parallel, cmd.Flags().Changed("parallel"))); err == nil {
					fmt.Fprintf(env.Stdout, "  estimated duration on the reference machine: %s%s\n", plan.FormatEstimate(e.Total), parallelPart(e))
				}
				for _, n := range p.Notes() {
					fmt.Fprintf(env.Stdout, "  note: %s\n", n)
				}
				for _, c := range peers.Commands(p.Stacks()) {
					fmt.Fprintf(env.Stdout, "  runs command (as root, only with run --allow-commands): %s\n", c)
				}
				if cells {
					all, err := p.Expand()
					if err != nil {
						return err
					}
					for i := range all {
						c := &all[i]
						fmt.Fprintf(env.Stdout, "  %s  x%d%s  up=%q down=%q\n", c.Key, c.Iterations, warmMark(c.Warmup), c.LinkUp, c.LinkDown)
					}
				}
			}
			if len(bad) > 0 {
				return Usage(fmt.Errorf("invalid plan: %s", strings.Join(bad, ", ")), "the plan format is described in docs/plan-format.md")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&cells, "cells", false, "list every cell with its iterations and link specs")
	cmd.Flags().BoolVar(&quick, "quick", false, "validate the plan's quick variant")
	return cmd
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func warmMark(w bool) string {
	if w {
		return "+warm-up"
	}
	return ""
}

// loadPlanArg loads a plan file, or a built-in plan when no such file exists
// and the argument names one.
func loadPlanArg(arg string) (*plan.Plan, error) {
	p, err := plan.Load(arg)
	if errors.Is(err, os.ErrNotExist) {
		if b, berr := plan.Builtin(arg); berr == nil {
			return b, nil
		}
	}
	return p, err
}

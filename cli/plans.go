package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/plan"
)

func init() { Register("plans", newPlansCommand) }

func newPlansCommand(env *Env) *cobra.Command {
	var quick bool
	cmd := &cobra.Command{
		Use:   "plans [NAME]",
		Short: "List the built-in plans, or print one as YAML to copy and edit",
		Long: `Without an argument, lists the built-in plans with their cell and sample
counts (samples include one warm-up per cell; QUICK is the sample count of the
--quick variant) and ESTIMATE, the estimated duration of a full run on the
reference machine (a 2-core VM; an order of magnitude, see "Estimated
duration" in docs/plan-format.md). With a NAME, prints that plan as YAML, with
its estimated duration in a first comment line and the comments that explain
its design: save it, edit it and run it with quicbench run --plan FILE.
The plan format is described in docs/plan-format.md.`,
		Example: `  quicbench plans
  quicbench plans page-load-grid > my-grid.yaml
  quicbench plans degraded-networks --quick
  quicbench plans validate my-grid.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listPlans(env.Stdout)
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
			e, err := p.Estimate()
			if err != nil {
				return err
			}
			// A comment: the output stays the plan, valid YAML that parses
			// to the same plan.
			if _, err := fmt.Fprintf(env.Stdout, "# estimated duration on the reference machine: %s (%d samples)\n",
				plan.FormatEstimate(e.Total), p.Counts().Total()); err != nil {
				return err
			}
			_, err = env.Stdout.Write(data)
			return err
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "print the plan's quick variant (fewer iterations, scenarios and values; every test kept)")
	cmd.AddCommand(newPlansValidateCommand(env))
	return cmd
}

func listPlans(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCELLS\tSAMPLES\tQUICK\tESTIMATE\tDESCRIPTION")
	for _, info := range plan.Builtins() {
		p, err := plan.Builtin(info.Name)
		if err != nil {
			return fmt.Errorf("built-in plan %s: %w", info.Name, err)
		}
		q, err := p.Quick()
		if err != nil {
			return err
		}
		e, err := p.Estimate()
		if err != nil {
			return fmt.Errorf("built-in plan %s: %w", info.Name, err)
		}
		c := p.Counts()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", info.Name, c.Cells, c.Total(), q.Counts().Total(), plan.FormatEstimate(e.Total), info.Description)
	}
	return tw.Flush()
}

func newPlansValidateCommand(env *Env) *cobra.Command {
	var cells, quick bool
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check plan files and show what they expand to",
		Long: `Parses each plan file, reports every problem with its file:line:col, the
field, the bad value and what is allowed (exit code 2), or prints what the plan
expands to: scenarios, cells and samples, and the notes about combinations it
leaves out on purpose (for example a raw transport listed for a page test).
A built-in plan's name is accepted in place of a file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
				if e, err := p.Estimate(); err == nil {
					fmt.Fprintf(env.Stdout, "  estimated duration on the reference machine: %s\n", plan.FormatEstimate(e.Total))
				}
				for _, n := range p.Notes() {
					fmt.Fprintf(env.Stdout, "  note: %s\n", n)
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

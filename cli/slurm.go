package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/cluster"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

func init() { Register("slurm", newSlurmCmd) }

func newSlurmCmd(env *Env) *cobra.Command {
	var (
		planArg, dir, qb string
		shards, parallel int
		submit, partial  bool
	)
	cmd := &cobra.Command{
		Use:   "slurm --plan NAME|FILE --shards N [-o DIR] [--submit] [-- SBATCH-OPTIONS...]",
		Short: "Write (and submit) a Slurm array job running a plan's shards, and its merge job",
		Long: `Split a plan into N shards and write the Slurm jobs that run them into DIR
(default: slurm-PLAN): plan.yaml (the plan), array.sh (an array job, task K runs
quicbench run --plan DIR/plan.yaml --shard K/N -o DIR/shard-K.db, or resumes that
database when it exists, so a requeued task continues where it stopped), merge.sh (quicbench
merge of the shards into DIR/all.db) and submit.sh (submits both, the merge depending on the
array). With --submit, the two jobs are submitted at once and their ids printed.

DIR must be on a filesystem that the nodes and the merge job see (docs/scale.md explains
other set-ups). The nodes run the quicbench binary at the path of this one unless
--quicbench says where it is there. Options after -- are sbatch options, added to both
scripts as #SBATCH lines (e.g. -- --partition=main --time=4:00:00).`,
		Example: `  quicbench slurm --plan page-load-grid --shards 16 --parallel 4 --submit
  quicbench slurm --plan mine.yaml --shards 8 -o /shared/mine -- --partition=lab --time=2:00:00
  quicbench slurm --plan mine.yaml --shards 8 --partial --quicbench /opt/qb/bin/quicbench`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash != 0 && len(args) > 0 {
				return Usage(fmt.Errorf("unexpected argument %q", args[0]), "sbatch options go after --")
			}
			p, err := loadShardedPlan(env, planArg, shards)
			if err != nil {
				return err
			}
			if dir == "" {
				dir = "slurm-" + safeName(p.Name)
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if qb == "" {
				qb = env.Exe
			}
			if qb == "" {
				return Usage(errors.New("the path of the quicbench binary is unknown"), "give it with --quicbench PATH")
			}
			if qb, err = filepath.Abs(qb); err != nil {
				return err
			}
			s := cluster.Slurm{Plan: safeName(p.Name), Shards: shards, Dir: abs, Quicbench: qb, Parallel: parallel, Partial: partial, Sbatch: args}
			if err := s.Validate(); err != nil {
				return Usage(err, "")
			}
			if err := s.Write(p.YAML()); err != nil {
				if errors.Is(err, cluster.ErrOtherPlan) {
					return Usage(err, "")
				}
				return &ExitError{Code: ExitEnv, Err: fmt.Errorf("writing the Slurm jobs: %w", err), Hint: "-o DIR must be a writable directory"}
			}
			fmt.Fprintf(env.Stderr, "wrote %s: %s, %s, %s, %s (%d shards)\n", abs, cluster.PlanFile, cluster.ArrayScriptFile, cluster.MergeScriptFile, cluster.SubmitFile, shards)
			if !submit {
				fmt.Fprintf(env.Stderr, "submit with: bash %s\n", shellArg(filepath.Join(abs, cluster.SubmitFile)))
				return nil
			}
			array, err := sbatch(cmd, abs, filepath.Join(abs, cluster.ArrayScriptFile))
			if err != nil {
				return err
			}
			merge, err := sbatch(cmd, abs, "--dependency="+s.Dependency(array), filepath.Join(abs, cluster.MergeScriptFile))
			if err != nil {
				return fmt.Errorf("%w (the array job %s is submitted: cancel it with scancel %s, or submit the merge job by hand)", err, array, array)
			}
			fmt.Fprintf(env.Stdout, "array job %s\nmerge job %s\n", array, merge)
			fmt.Fprintf(env.Stderr, "results: %s when the merge job has run (squeue -j %s,%s)\n", filepath.Join(abs, cluster.MergedFile), array, merge)
			return nil
		},
	}
	outputFlag(cmd, &dir, "directory of the plan copy, scripts, shard databases and logs (default: slurm-PLAN)")
	f := cmd.Flags()
	f.StringVarP(&planArg, "plan", "p", "", "built-in plan name or plan file (YAML)")
	f.IntVar(&shards, "shards", 0, "number of shards (array tasks)")
	f.IntVar(&parallel, "parallel", 0, "testbeds at once in each shard (quicbench run --parallel)")
	f.BoolVar(&submit, "submit", false, "submit the array job and the merge job with sbatch")
	f.BoolVar(&partial, "partial", false, "merge whatever the shards stored even if some failed (afterany, merge --partial)")
	f.StringVar(&qb, "quicbench", "", "path of the quicbench binary on the nodes (default: this binary)")
	return cmd
}

// loadShardedPlan checks the --plan and --shards of slurm and k8s, loads
// the plan and checks that it can be sharded (checkShards).
func loadShardedPlan(env *Env, planArg string, shards int) (*plan.Plan, error) {
	if planArg == "" {
		return nil, Usage(errors.New("no plan: give --plan NAME|FILE"), "")
	}
	if shards < 1 || shards > cluster.MaxShards {
		return nil, Usage(fmt.Errorf("--shards %d: want 1..%d shards", shards, cluster.MaxShards), "")
	}
	p, err := loadPlan(planArg)
	if err != nil {
		return nil, err
	}
	if cmds := peers.Commands(p.Stacks()); len(cmds) > 0 {
		// a cluster job runs what it is handed, unattended, as root
		return nil, Usage(fmt.Errorf("plan %s declares stacks whose commands a run would execute (%s): cluster jobs never run commands", p.Name, strings.Join(cmds, "; ")),
			"run such a plan on a machine of your own with quicbench run --allow-commands")
	}
	return p, checkShards(env, p, shards)
}

// checkShards refuses a plan that cannot be sharded (adaptive iterations),
// as every shard's run would, and says on stderr how the plan's blocks
// fall into n shards: the longest shard's estimate, and shards left empty.
func checkShards(env *Env, p *plan.Plan, n int) error {
	if p.Precision() > 0 {
		return Usage(fmt.Errorf("plan %s has a precision target (adaptive iterations), whose stopping rule needs all of a group's iterations in one run: it cannot be sharded", p.Name),
			"give the plan fixed iterations (remove precision) to shard it")
	}
	sh, err := p.Shards(n)
	if err != nil {
		return Usage(err, "")
	}
	var longest time.Duration
	empty := 0
	for _, t := range sh.Totals {
		longest = max(longest, t)
	}
	count := make([]int, n)
	for _, k := range sh.Of {
		count[k-1]++
	}
	for _, c := range count {
		if c == 0 {
			empty++
		}
	}
	fmt.Fprintf(env.Stderr, "%d blocks in %d shards: the longest shard is estimated at %s\n", len(sh.Blocks), n, plan.FormatEstimate(longest))
	if empty > 0 {
		fmt.Fprintf(env.Stderr, "warning: %d of %d shards get no block and finish at once: the plan has only %d blocks (shard no further than about blocks / 2)\n", empty, n, len(sh.Blocks))
	}
	return nil
}

// sbatch submits a job with sbatch --parsable from dir and returns its id.
func sbatch(cmd *cobra.Command, dir string, args ...string) (string, error) {
	c := exec.CommandContext(cmd.Context(), "sbatch", append([]string{"--parsable"}, args...)...)
	c.Dir = dir
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", &ExitError{Code: ExitEnv, Err: errors.New("sbatch not found: is this a Slurm submit host?"), Hint: "without --submit, the scripts are written for you to submit elsewhere"}
		}
		return "", fmt.Errorf("sbatch %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	// --parsable prints "jobid" or "jobid;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(out.String()), ";")
	if !jobID.MatchString(id) {
		return "", fmt.Errorf("sbatch %s: unexpected output %q", strings.Join(args, " "), out.String())
	}
	return id, nil
}

var jobID = regexp.MustCompile(`^[0-9]+$`)

// safeName makes a plan name usable in file and job names.
func safeName(s string) string {
	s = unsafeName.ReplaceAllString(s, "-")
	if s == "" {
		return "plan"
	}
	return s
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// shellArg quotes s for a hint the user copies into a shell.
func shellArg(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

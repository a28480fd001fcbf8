package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/store"
)

func init() { Register("merge", newMergeCmd) }

func newMergeCmd(env *Env) *cobra.Command {
	var (
		out     string
		partial bool
	)
	cmd := &cobra.Command{
		Use:   "merge SHARD.db... -o ALL.db [--partial]",
		Short: "Merge the databases of a run's shards (run --shard K/N) into one run",
		Long: `Merge the databases of the shards of one run (quicbench run --plan P --shard K/N, one
database per shard, run on any machines) into a new database holding the whole run: the plan's
cells once, every sample with the shard and host that took it. The merged database reads like
that of a run taken on one machine (report, export, compare).

It refuses shards of different plans, plan hashes, seeds, shard counts, quicbench versions or
commits, Go or quic-go versions or browsers, two databases of the same shard, and a sample
(cell and iteration) in two databases. The kernel, CPU and host may differ: each shard's are
recorded (table run_shards) and a run warning says when they differ. A shard not given, or
not complete, is refused unless --partial: then the merged run records which shards are
missing or incomplete as run warnings, and is complete only when every shard was.`,
		Example: `  quicbench merge shard-*.db -o all.db
  quicbench merge shard-1.db shard-2.db shard-4.db -o partial.db --partial`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return Usage(errors.New("merge takes the shards' databases"), "quicbench merge SHARD.db... -o ALL.db")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return Usage(errors.New("no output: give -o ALL.db"), "quicbench merge SHARD.db... -o ALL.db")
			}
			if _, err := os.Stat(out); err == nil {
				return Usage(fmt.Errorf("%s already exists: merge never overwrites a file", out), "choose another -o, or remove it first")
			}
			for _, a := range args {
				if a == out {
					return Usage(fmt.Errorf("%s is both an input and the output", a), "")
				}
			}
			res, err := store.Merge(cmd.Context(), out, args, partial)
			if err != nil {
				return err
			}
			state := "complete"
			if !res.Complete {
				state = "incomplete"
			}
			fmt.Fprintf(env.Stderr, "merged %d of %d shards (%d samples) into %s, run %d %s\n", len(res.Merged), res.N, res.Samples, out, res.RunID, state)
			for _, w := range res.Warnings {
				fmt.Fprintln(env.Stderr, "warning: "+w)
			}
			if len(res.Missing) > 0 {
				fmt.Fprintf(env.Stderr, "missing: %s\n", strings.Trim(fmt.Sprint(res.Missing), "[]"))
			}
			return nil
		},
	}
	outputFlag(cmd, &out, "merged database to create (must not exist)")
	cmd.Flags().BoolVar(&partial, "partial", false, "merge even when shards are missing or incomplete (the merged run names them)")
	return cmd
}

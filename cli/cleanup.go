package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/netns"
)

func init() { Register("cleanup", newCleanupCmd) }

func newCleanupCmd(env *Env) *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "cleanup [--all]",
		Short: "Remove namespaces, state and processes left by killed quicbench testbeds",
		Long: `cleanup removes what a killed quicbench left: namespaces under /run/netns named qb-*, state
files under /run/quicbench, and processes still running in those namespaces. Testbeds whose
quicbench process is alive are left alone unless --all is given (then they are stopped as by
testbed down). Runs that were not persistent leave nothing to clean: their namespaces die with
the process.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&all, "all", false, "also stop the testbeds that are still up")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was removed as a JSON array")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		var removed []string
		var errs []error
		if all {
			infos, err := netns.List()
			errs = append(errs, err)
			for _, i := range infos {
				if !i.Alive() {
					continue
				}
				if err := netns.Down(ctx, i.Name); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, "testbed "+i.Name+" (stopped)")
				}
			}
		}
		r, err := netns.Cleanup(ctx)
		removed = append(removed, r...)
		errs = append(errs, err)
		if asJSON {
			if removed == nil {
				removed = []string{}
			}
			writeJSONLine(env.Stdout, removed)
		} else if len(removed) == 0 {
			fmt.Fprintln(env.Stdout, "nothing to clean up")
		} else {
			for _, r := range removed {
				fmt.Fprintln(env.Stdout, "removed", r)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return testbedError(err)
		}
		return nil
	}
	return cmd
}

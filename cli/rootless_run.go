package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

// runReexec re-executes `quicbench run` inside a user and network namespace
// when the caller is not root (reexecRootless, as emulate and calibrate
// do): the runner, its testbeds and its server and agent processes then
// run there, as root of that namespace, which is the calling user outside,
// so the database and report belong to the user. handled says whether it
// did (err is then the outcome: the child's exit status, or why rootless
// mode is unavailable and what to do).
func runReexec(cmd *cobra.Command, env *Env) (handled bool, err error) {
	if netns.InRootless() || os.Geteuid() == 0 {
		return false, nil
	}
	return true, reexecRootless(cmd, env)
}

// rootlessNote is the first words of the run warning a rootless invocation
// of quicbench run stores.
const rootlessNote = "rootless:"

// runPlan runs runner.Run and records in the run's warnings that its
// samples were taken in rootless mode, with the differences from root mode
// found on this machine (netns.RootlessDifferences), or, for a run resumed
// as root, that its samples mix both modes. A note that cannot be stored
// is reported on opts.Log; the run's outcome stands.
func runPlan(ctx context.Context, opts runner.Options) (*runner.Summary, error) {
	sum, err := runner.Run(ctx, opts)
	if sum != nil && sum.RunID != 0 {
		if nerr := recordMode(context.WithoutCancel(ctx), opts.DB, sum, netns.InRootless()); nerr != nil && opts.Log != nil {
			fmt.Fprintf(opts.Log, "warning: recording the privilege mode of run %d: %v\n", sum.RunID, nerr)
		}
	}
	return sum, err
}

// recordMode stores the run warning that says how the samples of this
// invocation (sum) were taken: in rootless mode (rootless), or as root
// after earlier invocations that ran rootless. Each note is stored once.
func recordMode(ctx context.Context, path string, sum *runner.Summary, rootless bool) error {
	db, err := store.OpenExisting(path)
	if err != nil {
		return err
	}
	defer db.Close()
	warns, err := db.RunWarnings(ctx, sum.RunID)
	if err != nil {
		return err
	}
	wasRootless := slices.ContainsFunc(warns, func(w string) bool { return strings.HasPrefix(w, rootlessNote) })
	var note string
	switch {
	case rootless && !wasRootless:
		note = rootlessRunNote(sum.Resumed, netns.RootlessDifferences())
	case !rootless && wasRootless && sum.Taken > 0:
		note = "mixed privileges: this run was resumed as root after rootless invocations; its samples were taken in both modes"
	}
	if note == "" || slices.Contains(warns, note) {
		return nil
	}
	return db.AddRunWarning(ctx, sum.RunID, note)
}

// rootlessRunNote is the run warning of a rootless invocation that found
// resumed samples already stored (taken as root: an earlier rootless one
// would have left its note) and the differences diffs.
func rootlessRunNote(resumed int, diffs []string) string {
	var b strings.Builder
	b.WriteString(rootlessNote + " taken without root, in a user namespace (quicbench re-executed itself as root of a user and network namespace")
	fmt.Fprintf(&b, " mapped to uid %d)", netns.HostUID())
	if resumed > 0 {
		fmt.Fprintf(&b, "; only the samples after the first %d stored (taken as root)", resumed)
	}
	if len(diffs) == 0 {
		b.WriteString("; no difference from root mode found")
	}
	for _, d := range diffs {
		b.WriteString("; " + d)
	}
	return b.String()
}

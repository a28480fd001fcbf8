package cli

import (
	"errors"
	"fmt"

	"github.com/quicbench/quicbench/store"
)

// dbOpenError is the error of a reader (report, export) that could not
// open the results database at path: a damaged file is refused as such
// (exit 1, with the store's advice), anything else is bad input.
func dbOpenError(err error, hint string) error {
	if errors.Is(err, store.ErrCorrupt) {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	return Usage(err, hint)
}

// noteRunState tells a reader of the database at path (report, export)
// about a run that is not complete: still being written by a running
// quicbench (the store's write lock is held), or left running or
// interrupted by one that stopped (resumable). status is the run's stored
// status; runID 0 stands for the database as a whole.
func noteRunState(env *Env, path string, runID int64, status string, samples int) {
	what := "the database"
	if runID != 0 {
		what = fmt.Sprintf("run %d", runID)
	}
	h, busy, err := store.Writer(path)
	switch {
	case err != nil:
		fmt.Fprintf(env.Stderr, "note: cannot tell whether %s is being written: %v\n", path, err)
	case busy:
		fmt.Fprintf(env.Stderr, "note: %s is in progress: %s is being written by quicbench (%s); this shows the %d samples stored so far\n",
			what, path, h, samples)
	case runID != 0 && (status == store.RunRunning || status == store.RunInterrupted):
		fmt.Fprintf(env.Stderr, "note: %s is incomplete (%d samples stored) and nothing is writing it: continue it with quicbench run --resume %s\n",
			what, samples, path)
	}
}

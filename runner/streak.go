package runner

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// sameCauseLimit is how many samples in a row may fail with the same cause
// before the run stops: past it the endpoints or the machine are broken
// (a server that cannot be kept alive, a full disk, a missing file) and
// every further sample would record the same failure instead of a
// measurement.
const sameCauseLimit = 10

// failStreak counts the consecutive samples that failed with one cause.
// A timeout does not count: it is what a link too slow or too lossy for
// the sample's timeout measures (a dead link gives recorded timeouts), not
// a fault of the lab.
type failStreak struct {
	cause string // normalised error of the streak's samples
	n     int
	first string // the streak's first error, as stored
}

var digits = regexp.MustCompile(`[0-9]+`)

// normaliseCause makes the errors of one cause equal: numbers (ports,
// process ids, byte counts, durations) become "#".
func normaliseCause(e string) string { return digits.ReplaceAllString(e, "#") }

// isTimeout reports whether a sample's error is a timeout.
func isTimeout(e string) bool {
	e = strings.ToLower(e)
	return strings.Contains(e, "timeout") || strings.Contains(e, "timed out") || strings.Contains(e, "deadline exceeded")
}

// observe takes the next stored sample and returns an error when
// sameCauseLimit samples in a row have now failed with the same cause.
func (f *failStreak) observe(s *model.Sample) error {
	if s.Status != model.StatusFailed || isTimeout(s.Error) {
		*f = failStreak{}
		return nil
	}
	cause := normaliseCause(s.Error)
	if cause != f.cause {
		*f = failStreak{cause: cause, first: s.Error}
	}
	f.n++
	if f.n >= sameCauseLimit {
		return fmt.Errorf("stopping: the last %d samples failed with the same cause: %s", f.n, f.first)
	}
	return nil
}

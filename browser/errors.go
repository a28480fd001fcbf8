package browser

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNoBrowser is returned (wrapped) when no Chromium executable can be found.
var ErrNoBrowser = errors.New("no Chromium executable found")

// TimeoutError reports that a phase of a browser sample did not finish within
// its time limit. The browser was closed and its profile removed before the
// error was returned; the caller records the sample as failed.
type TimeoutError struct {
	Phase string        // "start" (browser start and attach) or "load" (navigation and measurement)
	URL   string        // page being loaded; "" for the start phase
	After time.Duration // the limit that expired
}

func (e *TimeoutError) Error() string {
	if e.URL == "" {
		return fmt.Sprintf("browser: %s timed out after %v", e.Phase, e.After)
	}
	return fmt.Sprintf("browser: %s of %s timed out after %v", e.Phase, e.URL, e.After)
}

// NavigationError reports that Chromium itself failed the page load, with
// the network error text Chromium gave (for example
// "net::ERR_QUIC_PROTOCOL_ERROR" or "net::ERR_CONNECTION_REFUSED").
type NavigationError struct {
	URL       string
	ErrorText string
}

func (e *NavigationError) Error() string {
	return fmt.Sprintf("browser: loading %s failed: %s", e.URL, e.ErrorText)
}

// IncompleteLoadError reports a page load whose load event had not ended
// when the measurement was read (Load waits up to LoadEventWait after the
// navigation for it): the page load time does not exist, and a zero in its
// place would read as an instant load. Load returns it together with the
// Result (its Load is zero); the caller stores the sample as invalid.
type IncompleteLoadError struct {
	URL    string
	Waited time.Duration // how long after the navigation Load waited for the event
}

func (e *IncompleteLoadError) Error() string {
	return fmt.Sprintf("browser: %s: the load event had not ended %v after the navigation (no page load time)", e.URL, e.Waited)
}

// InvalidLoad returns the error in err's chain that says a page load
// happened but did not measure what was asked (a *ProtocolMismatchError or
// an *IncompleteLoadError), or nil: such a sample is invalid, not failed.
func InvalidLoad(err error) error {
	var mm *ProtocolMismatchError
	if errors.As(err, &mm) {
		return mm
	}
	var il *IncompleteLoadError
	if errors.As(err, &il) {
		return il
	}
	return nil
}

// Mismatch is one resource that was fetched with another protocol than the
// one asked for.
type Mismatch struct {
	Name string // resource name as in model.Resource.Name
	Got  string // its nextHopProtocol ("" when Chromium reported none)
}

// ProtocolMismatchError reports a page load in which at least one resource
// (the document included) used another protocol than the one asked for.
// Load returns it together with the complete Result; the caller stores the
// sample as invalid, with this error as its cause.
type ProtocolMismatchError struct {
	Want       string     // expected nextHopProtocol: "http/1.1", "h2" or "h3"
	Total      int        // resources checked, the document included
	Mismatches []Mismatch // every resource that used something else, in load order
}

func (e *ProtocolMismatchError) Error() string {
	const show = 5
	var b strings.Builder
	fmt.Fprintf(&b, "browser: %d of %d resources did not use %s:", len(e.Mismatches), e.Total, e.Want)
	for i, m := range e.Mismatches {
		if i == show {
			fmt.Fprintf(&b, " and %d more", len(e.Mismatches)-show)
			break
		}
		got := m.Got
		if got == "" {
			got = "no protocol"
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s used %s", m.Name, got)
	}
	return b.String()
}

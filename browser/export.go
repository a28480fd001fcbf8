package browser

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file exports what another browser driver (package firefox) needs
// to produce the same Result, with the same metrics and the same checks,
// as Chromium's: the measurement script, its decoding, the check, and the
// teardown of a browser's process group. Chromium's own path does not use
// these wrappers.

// CollectJS is the page script that measures a load: a JavaScript
// expression whose value is a Promise of the page's timings (waiting
// first, bounded, for the load event and the first contentful paint).
// ParseCollected decodes its value, serialised as JSON.
const CollectJS = collectJS

// ParseCollected turns the JSON of CollectJS's value into a Result for a
// load in which every resource had to use protocol (model.ProtoH1, H1C, H2
// or H3). The fields CollectJS cannot see (Version, Negotiated, Status,
// ConnectionReused, Wall) are left for the caller. Call Result.Check next.
func ParseCollected(data []byte, protocol string) (*Result, error) {
	want, ok := NextHopProtocol(protocol)
	if !ok {
		return nil, fmt.Errorf("browser: protocol %q is not one of h1, h1c, h2, h3", protocol)
	}
	var raw rawResult
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("browser: decoding the page's timings: %w", err)
	}
	if raw.Nav == nil {
		return nil, errors.New("browser: the page has no navigation timing entry")
	}
	return raw.result(want, nil), nil
}

// Check returns a *ProtocolMismatchError when any resource (the document
// included) used another protocol than r.Protocol, else an
// *IncompleteLoadError when the load event never ended, else nil: what
// Session.Load checks before it returns a Result.
func (r *Result) Check() error { return r.check() }

// ReapGroup kills (SIGKILL) every process of process group pgid and waits,
// up to limit, until none is alive; then it waits for the group's zombies
// that were re-parented to this process (see the client agent's child
// subreaper), so that their CPU time counts in RUSAGE_CHILDREN. The group's
// leader must have been waited for by its exec.Cmd before the zombies are
// reaped; ReapGroup does not wait for it.
func ReapGroup(pgid int, limit time.Duration) error {
	if pgid <= 0 {
		return nil
	}
	err := reap("", pgid, limit)
	reapOrphans(pgid)
	return err
}

// CheckURL checks that u is an absolute URL whose scheme fits protocol
// proto (http:// for h1c, https:// otherwise), as a page load's URL must.
func CheckURL(u, proto string) error { return checkURL(u, proto) }

// CheckHostPort checks a host:port origin (a port in 1..65535).
func CheckHostPort(hp string) error { return checkHostPort(hp) }

// RemoveAllRetry removes a browser's profile directory, retrying for a
// while: a dying browser process may still create files in it.
func RemoveAllRetry(dir string) error { return removeAllRetry(dir) }

// FindExe returns the Chromium executable: exe when given (a path or a
// name on PATH), else Debian's chromium or one found on PATH. An error
// wraps ErrNoBrowser.
func FindExe(exe string) (string, error) { return findExe(exe) }

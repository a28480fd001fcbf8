package firefox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	driver "github.com/quicbench/quicbench/firefox"
)

// Environment variables of the client agent (the runner's environment) for
// investigating Firefox's samples (docs/peers.md, "Firefox (client)"; the
// Chromium stack has QUICBENCH_CHROMIUM_NETLOG). They change what a sample's browser does or
// writes, and are recorded nowhere in the results: use them for
// investigation runs, not for results to publish.
const (
	// firefoxPrefsEnv names a JSON object of Firefox preferences merged
	// over quicbench's (driver.Options.Prefs): strings, booleans,
	// integers, or null to remove one of quicbench's; {"*": null} removes
	// all of quicbench's but the protocol's.
	firefoxPrefsEnv = "QUICBENCH_FIREFOX_PREFS"
	// firefoxQlogEnv names a directory for neqo's qlog files: Firefox
	// writes one per HTTP/3 connection into its temporary directory
	// (TMPDIR/qlog_PID/), so the agent points TMPDIR there, turns
	// network.http.http3.enable_qlog on and ends every browser with an
	// orderly quit (driver.Session.Quit) so that the files are complete.
	firefoxQlogEnv = "QUICBENCH_FIREFOX_QLOG"
	// firefoxStartEnv is a Go duration that replaces Firefox's start
	// timeout (driver.Options.StartTimeout, 20 s by default): a machine
	// loaded by others can take longer than that to start it.
	firefoxStartEnv = "QUICBENCH_FIREFOX_START_TIMEOUT"
)

// quitLimit bounds Firefox's orderly quit with firefoxQlogEnv.
const quitLimit = 10 * time.Second

// investigation is what the investigation variables ask of the agent's
// browsers, read once.
type investigation struct {
	firefoxPrefs map[string]any
	firefoxQlog  string
	firefoxStart time.Duration
	err          error
}

var agentInvestigation = sync.OnceValue(func() *investigation { return readInvestigation(os.Getenv, os.Setenv) })

// readInvestigation reads the investigation variables with getenv; setenv
// points the process's TMPDIR into the qlog directory (Firefox inherits the
// agent's environment).
func readInvestigation(getenv func(string) string, setenv func(string, string) error) *investigation {
	inv := &investigation{}
	if f := getenv(firefoxPrefsEnv); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			inv.err = fmt.Errorf("%s: %w", firefoxPrefsEnv, err)
			return inv
		}
		if inv.firefoxPrefs, err = parsePrefs(b); err != nil {
			inv.err = fmt.Errorf("%s=%s: %w", firefoxPrefsEnv, f, err)
			return inv
		}
	}
	if v := getenv(firefoxStartEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			inv.err = fmt.Errorf("%s=%q: want a positive Go duration such as 60s", firefoxStartEnv, v)
			return inv
		}
		inv.firefoxStart = d
	}
	if d := getenv(firefoxQlogEnv); d != "" {
		abs, err := filepath.Abs(d)
		if err == nil {
			err = os.MkdirAll(abs, 0o755)
		}
		if err != nil {
			inv.err = fmt.Errorf("%s: %w", firefoxQlogEnv, err)
			return inv
		}
		inv.firefoxQlog = abs
	}
	if inv.firefoxQlog != "" {
		if err := setenv("TMPDIR", inv.firefoxQlog); err != nil {
			inv.err = fmt.Errorf("%s: setting TMPDIR: %w", firefoxQlogEnv, err)
		}
	}
	return inv
}

// parsePrefs decodes a JSON object of Firefox preferences: whole numbers
// become ints, null stays nil (remove), anything else but strings and
// booleans is an error naming the preference.
func parsePrefs(b []byte) (map[string]any, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON object of preferences: %w", err)
	}
	out := make(map[string]any, len(raw))
	for name, r := range raw {
		var v any
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch x := v.(type) {
		case nil, string, bool:
			out[name] = x
		case json.Number:
			n, err := strconv.Atoi(x.String())
			if err != nil {
				return nil, fmt.Errorf("%s: %s is not a whole number (Firefox preferences are strings, booleans or integers)", name, x)
			}
			out[name] = n
		default:
			return nil, fmt.Errorf("%s: %s is not a string, boolean, integer or null", name, r)
		}
	}
	return out, nil
}

// applyFirefox adds the investigation's preferences to o.
func (inv *investigation) applyFirefox(o *driver.Options) error {
	if inv.err != nil {
		return inv.err
	}
	if inv.firefoxStart > 0 {
		o.StartTimeout = inv.firefoxStart
	}
	if len(inv.firefoxPrefs) == 0 && inv.firefoxQlog == "" {
		return nil
	}
	p := make(map[string]any, len(o.Prefs)+len(inv.firefoxPrefs)+1)
	for k, v := range o.Prefs {
		p[k] = v
	}
	for k, v := range inv.firefoxPrefs {
		p[k] = v
	}
	if inv.firefoxQlog != "" {
		p["network.http.http3.enable_qlog"] = true
	}
	o.Prefs = p
	return nil
}

// keptFirefox is a Firefox the agent keeps across samples; with quit (the
// qlog investigation variable set) it quits in order before it closes, so
// that neqo's qlog files are complete.
type keptFirefox struct {
	*driver.Session
	quit bool
}

// keep wraps a started Firefox for the agent's pool: it quits in order
// when qlog files are wanted.
func (inv *investigation) keep(s *driver.Session) *keptFirefox {
	return &keptFirefox{Session: s, quit: inv.firefoxQlog != ""}
}

// Close ends the browser (in order first when quit) and removes its
// profile.
func (k *keptFirefox) Close() error {
	if !k.quit {
		return k.Session.Close()
	}
	return quittingSession{k.Session}.Close()
}

// quittingSession is a Firefox session that quits in order before Close
// kills what is left.
type quittingSession struct{ *driver.Session }

func (q quittingSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), quitLimit)
	qerr := q.Quit(ctx)
	cancel()
	err := q.Session.Close()
	if qerr != nil && !errors.Is(qerr, context.DeadlineExceeded) {
		return errors.Join(err, qerr)
	}
	return err
}

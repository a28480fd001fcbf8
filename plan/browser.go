package plan

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The plan's browser_restart values: how the browser clients (chromium,
// firefox) run their samples.
const (
	// BrowserRestartAuto (the default) keeps one browser per testbed
	// across samples and gives every sample a fresh isolated context
	// (a Chromium browser context, a Firefox user context).
	BrowserRestartAuto = "auto"
	// BrowserRestartAlways starts a fresh browser with a fresh profile for
	// every sample and closes it after the sample.
	BrowserRestartAlways = "always"
)

// BrowserRestarts lists the values of browser_restart.
var BrowserRestarts = []string{BrowserRestartAuto, BrowserRestartAlways}

// Limits of browser_memory_limit.
const (
	MinBrowserMemoryLimit = 64 << 20
	MaxBrowserMemoryLimit = 1 << 40
)

// Limits of browser_files_limit.
const (
	MinBrowserFileLimit = 64
	MaxBrowserFileLimit = 1 << 20
)

// BrowserRestart returns the plan's browser_restart: BrowserRestartAuto
// unless the plan says always. It enters the plan's Hash when always: a
// fresh browser per sample measures (and costs) something else than a
// fresh context in a running one.
func (p *Plan) BrowserRestart() string {
	if p.d.browserRestart == "" {
		return BrowserRestartAuto
	}
	return p.d.browserRestart
}

// BrowserMemoryLimit returns the plan's browser_memory_limit in bytes, or
// 0 when it does not set one (the client agent's default then applies): a
// kept browser whose processes hold more (proportional set size) is
// restarted before its next sample. Not part of the plan's Hash: it
// changes when browsers restart, not what a sample measures.
func (p *Plan) BrowserMemoryLimit() int64 { return p.d.browserMemoryLimit }

// BrowserFileLimit returns the plan's browser_files_limit, or 0 when it
// does not set one (the client agent's default then applies): a kept
// browser whose processes hold more open files together is restarted
// before its next sample. Not part of the plan's Hash, like
// BrowserMemoryLimit.
func (p *Plan) BrowserFileLimit() int { return int(p.d.browserFileLimit) }

// browserFields decodes browser_restart, browser_memory_limit and
// browser_files_limit.
func (d *decoder) browserFields(f map[string]field, out *doc) {
	if v, ok := f["browser_restart"]; ok {
		if s, ok := d.str(v.val, "browser_restart"); ok {
			if !contains(BrowserRestarts, s) {
				d.fail(v.val, "browser_restart", "expected one of "+strings.Join(BrowserRestarts, ", "))
			} else {
				out.browserRestart = s
			}
		}
	}
	if v, ok := f["browser_memory_limit"]; ok {
		if n, ok := d.size(v.val, "browser_memory_limit", MinBrowserMemoryLimit, MaxBrowserMemoryLimit); ok {
			out.browserMemoryLimit = n
		}
	}
	if v, ok := f["browser_files_limit"]; ok {
		if n, ok := d.integer(v.val, "browser_files_limit", MinBrowserFileLimit, MaxBrowserFileLimit); ok {
			out.browserFileLimit = n
		}
	}
}

// size reads a size such as 1500MB (model.ParseSize) within lo..hi.
func (d *decoder) size(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, path, "expected a size such as 1GB, got "+kindName(n))
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.fail(n, path, err.Error())
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n, path, fmt.Sprintf("out of range (allowed: %s..%s)", FormatSize(lo), FormatSize(hi)))
		return 0, false
	}
	return v, true
}

// renderBrowser adds the browser fields that are set to a rendered plan.
func (d *doc) renderBrowser(top mapBuilder) {
	if d.browserRestart != "" {
		top.add("browser_restart", scalar(d.browserRestart))
	}
	if d.browserMemoryLimit > 0 {
		top.add("browser_memory_limit", scalar(FormatSize(d.browserMemoryLimit)))
	}
	if d.browserFileLimit > 0 {
		top.add("browser_files_limit", scalar(strconv.FormatInt(d.browserFileLimit, 10)))
	}
}

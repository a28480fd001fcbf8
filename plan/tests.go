package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Test names, as written in plans and stored in model.Cell.Test.
const (
	TestLatency   = "latency"
	TestTTFB      = "ttfb"
	TestHandshake = "handshake"
	TestDownload  = "download"
	TestUpload    = "upload"
	TestMultiplex = "multiplex"
	TestStream    = "stream"
	TestPage      = "page"
	TestSite      = "site"
	TestCPU       = "cpu"
)

// Handshake modes (the mode parameter of the handshake test).
const (
	ModeFull    = "full"    // a fresh connection, full TLS handshake
	ModeResumed = "resumed" // TLS session resumption from a ticket of a previous connection
	ModeZeroRTT = "0rtt"    // resumption with the request sent as 0-RTT early data
)

// Connection kinds (the connection parameter of the page and site tests).
const (
	// ConnCold: every sample starts from nothing: fresh connections (and,
	// in Chromium, a fresh profile with the cache disabled).
	ConnCold = "cold"
	// ConnWarm: the measured load runs over connections that were already
	// established and used within the same sample (Chromium: a fresh
	// profile, one unmeasured priming load of the same page, then the
	// measured load with the HTTP cache disabled).
	ConnWarm = "warm"
)

// GeneratedSites are the names of the static sites quicbench generates and
// serves for the site test, shaped like study D's three web sites
// (requests x total weight).
var GeneratedSites = []string{"site-39x3mb", "site-19x1mb", "site-56x2mb"}

type paramKind int

const (
	kindInt paramKind = iota
	kindSize
	kindDuration
	kindEnum
	kindSite
)

// paramDef describes one parameter of a test: its type, default and range.
type paramDef struct {
	name     string
	kind     paramKind
	def      string // canonical default; "" = required
	min, max int64  // inclusive range (bytes, count or nanoseconds)
	enum     []string
	quickMax int64 // Quick() caps values at this (0 = no cap)
}

// testDef describes one test: its parameters in canonical order, primary
// metric, and which protocols and clients can run it.
type testDef struct {
	name    string
	metric  string
	unit    string
	higher  bool
	raw     bool // raw tcp and quic transports take part
	browser bool // the chromium client can run it
	params  []paramDef
}

const (
	kb  = 1000
	mb  = 1000 * kb
	gb  = 1000 * mb
	sec = int64(time.Second)
)

var (
	pSize100GB = paramDef{name: "size", kind: kindSize, min: 1, max: 100 * gb, quickMax: mb}
	pObjects   = paramDef{name: "objects", kind: kindInt, def: "10", min: 1, max: 1000, quickMax: 10}
	// pConnection comes last among the page and site parameters, so that
	// it is the last part of their cell keys' parameter list.
	pConnection = paramDef{name: "connection", kind: kindEnum, def: ConnCold, enum: []string{ConnCold, ConnWarm}}
)

func withDefault(p paramDef, def string) paramDef { p.def = def; return p }

var testDefs = []testDef{
	{name: TestLatency, metric: "latency_ms", unit: "ms", raw: true, params: []paramDef{
		{name: "requests", kind: kindInt, def: "20", min: 1, max: 100000, quickMax: 10},
		{name: "size", kind: kindSize, def: "0B", min: 0, max: 100 * mb, quickMax: mb},
	}},
	{name: TestTTFB, metric: "ttfb_ms", unit: "ms", raw: true, params: []paramDef{
		{name: "size", kind: kindSize, def: "1KB", min: 1, max: 100 * gb, quickMax: mb},
	}},
	{name: TestHandshake, metric: "handshake_ms", unit: "ms", params: []paramDef{
		{name: "mode", kind: kindEnum, def: ModeFull, enum: []string{ModeFull, ModeResumed, ModeZeroRTT}},
	}},
	{name: TestDownload, metric: "goodput_mbps", unit: "Mbit/s", higher: true, raw: true, params: []paramDef{
		withDefault(pSize100GB, "1MB"),
	}},
	{name: TestUpload, metric: "goodput_mbps", unit: "Mbit/s", higher: true, raw: true, params: []paramDef{
		withDefault(pSize100GB, "1MB"),
	}},
	{name: TestMultiplex, metric: "span_ms", unit: "ms", params: []paramDef{
		pObjects,
		{name: "size", kind: kindSize, def: "100KB", min: 1, max: 10 * gb, quickMax: mb},
	}},
	{name: TestStream, metric: "interval_p95_ms", unit: "ms", params: []paramDef{
		{name: "segments", kind: kindInt, def: "20", min: 2, max: 100000, quickMax: 10},
		{name: "interval", kind: kindDuration, def: "50ms", min: 0, max: 60 * sec, quickMax: int64(20 * time.Millisecond)},
		{name: "size", kind: kindSize, def: "16KB", min: 1, max: 1 * gb, quickMax: mb},
	}},
	{name: TestPage, metric: "plt_ms", unit: "ms", browser: true, params: []paramDef{
		pObjects,
		{name: "size", kind: kindSize, def: "10KB", min: 1, max: 1 * gb, quickMax: mb},
		pConnection,
	}},
	{name: TestSite, metric: "plt_ms", unit: "ms", browser: true, params: []paramDef{
		{name: "site", kind: kindSite},
		pConnection,
	}},
	{name: TestCPU, metric: "cpu_s_per_mb", unit: "s/MB", params: []paramDef{
		{name: "size", kind: kindSize, def: "100MB", min: 1, max: 100 * gb, quickMax: 10 * mb},
	}},
}

// Primary metric of the lighthouse client's cells: Lighthouse's own
// performance score, 0 to 100 (docs/metrics.md).
const (
	LighthouseMetric = "lh_score"
	LighthouseUnit   = "points"
)

// LighthouseMinTimeout is the shortest per-sample timeout of a lighthouse
// cell. The agent tells Lighthouse to stop waiting for the page's load 30 s
// before the sample's timeout ends (after the browser's start): it needs
// 5.25 s of network and CPU quiet after the load, then audits. The minimum
// leaves 10 s for the load and 1 s for the browser's start.
const LighthouseMinTimeout = 41 * time.Second

// primary returns the primary metric of the test's cells for a client: the
// test's own, except for the lighthouse client, whose cells compare
// Lighthouse's performance score (higher is better).
func (t *testDef) primary(client string) (metric, unit string, higher bool) {
	if client == model.ClientLighthouse {
		return LighthouseMetric, LighthouseUnit, true
	}
	return t.metric, t.unit, t.higher
}

func lookupTest(name string) *testDef {
	for i := range testDefs {
		if testDefs[i].name == name {
			return &testDefs[i]
		}
	}
	return nil
}

func testNames() []string {
	var s []string
	for _, t := range testDefs {
		s = append(s, t.name)
	}
	return s
}

func (t *testDef) param(name string) *paramDef {
	for i := range t.params {
		if t.params[i].name == name {
			return &t.params[i]
		}
	}
	return nil
}

func (t *testDef) paramNames() []string {
	var s []string
	for _, p := range t.params {
		s = append(s, p.name)
	}
	return s
}

// allowed describes the values a parameter accepts, for error messages.
func (p *paramDef) allowed() string {
	switch p.kind {
	case kindInt:
		return fmt.Sprintf("an integer, %d..%d", p.min, p.max)
	case kindSize:
		return FormatSize(p.min) + ".." + FormatSize(p.max)
	case kindDuration:
		return formatDuration(time.Duration(p.min)) + ".." + formatDuration(time.Duration(p.max))
	case kindEnum:
		return strings.Join(p.enum, ", ")
	case kindSite:
		return strings.Join(GeneratedSites, ", ") + ", or a directory path such as ./mysite"
	}
	return ""
}

// parseValue checks one value of the parameter and returns its canonical
// text, or a message saying what is wrong.
func (p *paramDef) parseValue(v string, isInt bool) (string, string) {
	switch p.kind {
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || !isInt {
			return "", "not an integer"
		}
		if n < p.min || n > p.max {
			return "", fmt.Sprintf("%s out of range", p.name)
		}
		return strconv.FormatInt(n, 10), ""
	case kindSize:
		n, err := ParseSize(v)
		if err != nil {
			if strings.HasPrefix(strings.TrimSpace(v), "-") {
				return "", p.name + " must be positive"
			}
			return "", err.Error()
		}
		if n < p.min {
			if p.min == 1 {
				return "", p.name + " must be positive"
			}
			return "", p.name + " too small"
		}
		if n > p.max {
			return "", p.name + " too large"
		}
		return FormatSize(n), ""
	case kindDuration:
		d, err := parseDuration(v)
		if err != nil {
			return "", err.Error()
		}
		if int64(d) < p.min || int64(d) > p.max {
			return "", fmt.Sprintf("%s out of range", p.name)
		}
		return formatDuration(d), ""
	case kindEnum:
		for _, e := range p.enum {
			if v == e {
				return v, ""
			}
		}
		return "", fmt.Sprintf("unknown %s", p.name)
	case kindSite:
		for _, s := range GeneratedSites {
			if v == s {
				return v, ""
			}
		}
		if v == "" {
			return "", "empty site"
		}
		if strings.ContainsAny(v, "\n\r\t") {
			return "", "site path contains a control character"
		}
		if !strings.ContainsRune(v, '/') && !strings.HasPrefix(v, ".") {
			return "", "unknown generated site (a directory must be written as a path, e.g. ./" + v + ")"
		}
		return v, ""
	}
	return "", "unknown parameter kind"
}

// Params are the typed parameters of a cell's test, decoded from the cell's
// factors. Fields that the test does not take are zero.
type Params struct {
	Requests int           // latency: requests over one established connection
	Size     int64         // bytes: response (latency, ttfb), transfer (download, upload, cpu), per object (multiplex, page), per segment (stream)
	Mode     string        // handshake: full, resumed or 0rtt
	Objects  int           // multiplex, page: number of objects
	Segments int           // stream: number of segments
	Interval time.Duration // stream: time between segments
	Site     string        // site: a generated site name or a directory path
	// Connection is page, site: ConnCold or ConnWarm.
	Connection string
}

// CellParams decodes the test parameters of a cell produced by Expand.
func CellParams(c *model.Cell) (Params, error) { return cellParams(c, false) }

// cellParams decodes the test parameters of a cell; with defaults, a
// parameter the cell lacks (a cell stored by an older quicbench, before
// the test had it) takes its default rather than failing.
func cellParams(c *model.Cell, defaults bool) (Params, error) {
	var p Params
	t := lookupTest(c.Test)
	if t == nil {
		return p, fmt.Errorf("cell %s: unknown test %q", c.Key, c.Test)
	}
	for _, d := range t.params {
		v, ok := c.Factor(d.name)
		if !ok && defaults && d.def != "" {
			v, ok = d.def, true
		}
		if !ok {
			return p, fmt.Errorf("cell %s: missing parameter %s", c.Key, d.name)
		}
		var err error
		switch d.name {
		case "requests":
			p.Requests, err = strconv.Atoi(v)
		case "objects":
			p.Objects, err = strconv.Atoi(v)
		case "segments":
			p.Segments, err = strconv.Atoi(v)
		case "size":
			p.Size, err = ParseSize(v)
		case "interval":
			p.Interval, err = parseDuration(v)
		case "mode":
			p.Mode = v
		case "site":
			p.Site = v
		case "connection":
			p.Connection = v
		}
		if err != nil {
			return p, fmt.Errorf("cell %s: parameter %s: %v", c.Key, d.name, err)
		}
	}
	return p, nil
}

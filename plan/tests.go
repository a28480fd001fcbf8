package plan

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// A test is defined once, in a file of its own (test_NAME.go), by a
// testDef that it registers: its name, primary metric, the protocols and
// clients that can run it, its typed parameters (paramDef: kind, default,
// limits) and its estimate. Plan validation, expansion, the estimate and
// CellParams, which decodes the parameters the runner hands the client
// agent, all read that one definition; package workload runs the tests.

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

// paramDef describes one parameter of a test: its type, default and range,
// and the field of Params that holds its decoded value.
type paramDef struct {
	name     string
	kind     paramKind
	def      string // canonical default; "" = required
	min, max int64  // inclusive range (bytes, count or nanoseconds)
	enum     []string
	quickMax int64 // Quick() caps values at this (0 = no cap)
	// field returns a pointer to the parameter's field of p: *int for
	// kindInt, *int64 for kindSize, *time.Duration for kindDuration,
	// *string for kindEnum and kindSite.
	field func(p *Params) any
}

// testDef describes one test: its parameters in canonical order, primary
// metric, which protocols and clients can run it, and its estimate.
type testDef struct {
	seq     int // position in documentation order (the order of Tests)
	name    string
	metric  string
	unit    string
	higher  bool
	raw     bool // raw tcp and quic transports take part
	browser bool // the chromium and lighthouse clients can run it (page loads)
	bench   bool // the browser clients but lighthouse run it in the bench page (bench.go)
	params  []paramDef
	// estimate is the client's part of one sample over the path m (the
	// test's preparation and its measured part); inBrowser for the
	// chromium and lighthouse clients.
	estimate func(m *estModel, p Params, inBrowser bool) time.Duration
}

// testDefs are the registered tests, in documentation order.
var testDefs []*testDef

// register adds a test's definition (from the init function of its file).
func register(t *testDef) {
	if lookupTest(t.name) != nil || t.estimate == nil {
		panic("plan: test " + t.name + " registered twice or without an estimate")
	}
	for _, p := range t.params {
		if p.field == nil || !p.fits() {
			panic("plan: parameter " + p.name + " of test " + t.name + " has no field of its kind's type")
		}
	}
	i := sort.Search(len(testDefs), func(i int) bool { return testDefs[i].seq > t.seq })
	testDefs = slices.Insert(testDefs, i, t)
}

// fits says whether the parameter's field has the type of its kind.
func (d *paramDef) fits() bool {
	switch d.field(&Params{}).(type) {
	case *int:
		return d.kind == kindInt
	case *int64:
		return d.kind == kindSize
	case *time.Duration:
		return d.kind == kindDuration
	case *string:
		return d.kind == kindEnum || d.kind == kindSite
	}
	return false
}

// Tests returns the names of the registered tests in documentation order.
func Tests() []string { return testNames() }

const (
	kb  = 1000
	mb  = 1000 * kb
	gb  = 1000 * mb
	sec = int64(time.Second)
)

// Parameters that several tests share, and the fields that hold them.
func fieldSize(p *Params) any       { return &p.Size }
func fieldObjects(p *Params) any    { return &p.Objects }
func fieldConnection(p *Params) any { return &p.Connection }

var (
	pSize100GB = paramDef{name: "size", kind: kindSize, min: 1, max: 100 * gb, quickMax: mb, field: fieldSize}
	pObjects   = paramDef{name: "objects", kind: kindInt, def: "10", min: 1, max: 1000, quickMax: 10, field: fieldObjects}
	// pConnection comes last among the page and site parameters, so that
	// it is the last part of their cell keys' parameter list.
	pConnection = paramDef{name: "connection", kind: kindEnum, def: ConnCold, enum: []string{ConnCold, ConnWarm}, field: fieldConnection}
)

func withDefault(p paramDef, def string) paramDef { p.def = def; return p }

// primary returns the primary metric of the test's cells for a client: the
// test's own, except for a client whose description gives its own (an
// audit client's score, higher is better).
func (t *testDef) primary(client string) (metric, unit string, higher bool) {
	if st, ok := peers.ClientStack(client); ok && st.Client.Metric != nil {
		m := st.Client.Metric
		return m.Name, m.Unit, m.HigherIsBetter
	}
	return t.metric, t.unit, t.higher
}

func lookupTest(name string) *testDef {
	for _, t := range testDefs {
		if t.name == name {
			return t
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
// factors (CellParams) and handed to the client agent as they are. Fields
// that the test does not take are zero.
type Params struct {
	Requests int           `json:"requests,omitempty"` // latency: requests over one established connection
	Size     int64         `json:"size,omitempty"`     // bytes: response (latency, ttfb), transfer (download, upload, cpu), per object (multiplex, page), per segment (stream)
	Mode     string        `json:"mode,omitempty"`     // handshake: full, resumed or 0rtt
	Objects  int           `json:"objects,omitempty"`  // multiplex, page: number of objects
	Segments int           `json:"segments,omitempty"` // stream: number of segments
	Interval time.Duration `json:"interval,omitempty"` // stream: time between segments
	Site     string        `json:"site,omitempty"`     // site: a generated site name or a directory path
	// Connection is page, site: ConnCold or ConnWarm.
	Connection string `json:"connection,omitempty"`
	// Duration is fairness: how long the flows run.
	Duration time.Duration `json:"duration,omitempty"`
}

// CellParams decodes the test parameters of a cell produced by Expand. A
// parameter the cell lacks, or one that does not parse or is out of the
// test's limits, is an error.
func CellParams(c *model.Cell) (Params, error) { return cellParams(c, false) }

// StoredCellParams is CellParams for a cell stored by a run: a parameter
// the cell lacks (a cell stored by an older quicbench, before the test had
// it) takes its default rather than failing. A value that is there must
// parse.
func StoredCellParams(c *model.Cell) (Params, error) { return cellParams(c, true) }

// cellParams decodes the test parameters of a cell; with defaults, a
// parameter the cell lacks takes its default.
func cellParams(c *model.Cell, defaults bool) (Params, error) {
	t := lookupTest(c.Test)
	if t == nil {
		return Params{}, fmt.Errorf("cell %s: unknown test %q", c.Key, c.Test)
	}
	p, err := t.decode(c.Factor, defaults)
	if err != nil {
		return p, fmt.Errorf("cell %s: %w", c.Key, err)
	}
	return p, nil
}

// DecodeParams decodes the parameters of a test from their text as a plan
// writes them ("size": "10KB"); a parameter missing from values takes its
// default. A value that does not parse, or is out of the test's limits, is
// an error; the Params returned then hold what was decoded until it.
func DecodeParams(test string, values map[string]string) (Params, error) {
	t := lookupTest(test)
	if t == nil {
		return Params{}, fmt.Errorf("unknown test %q", test)
	}
	return t.decode(func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}, true)
}

// decode decodes the test's parameters, looking each up by name; with
// defaults, one that is not found takes its default. It then checks them.
func (t *testDef) decode(lookup func(name string) (string, bool), defaults bool) (Params, error) {
	var p Params
	for i := range t.params {
		d := &t.params[i]
		v, ok := lookup(d.name)
		if !ok && defaults && d.def != "" {
			v, ok = d.def, true
		}
		if !ok {
			return p, fmt.Errorf("missing parameter %s", d.name)
		}
		if err := d.decode(&p, v); err != nil {
			return p, fmt.Errorf("parameter %s: %v", d.name, err)
		}
	}
	return p, t.check(p)
}

// decode sets the parameter's field of p from its text in a cell.
func (d *paramDef) decode(p *Params, v string) error {
	var err error
	switch f := d.field(p).(type) {
	case *int:
		*f, err = strconv.Atoi(v)
	case *int64:
		*f, err = ParseSize(v)
	case *time.Duration:
		*f, err = parseDuration(v)
	case *string:
		*f = v
	}
	return err
}

// text returns the parameter's value in p as the plan writes it.
func (d *paramDef) text(p *Params) string {
	switch f := d.field(p).(type) {
	case *int:
		return strconv.Itoa(*f)
	case *int64:
		return FormatSize(*f)
	case *time.Duration:
		return formatDuration(*f)
	case *string:
		return *f
	}
	return ""
}

// check says which parameter of p is out of the test's limits, if any. A
// site may also be the name under which the runner serves a directory.
func (t *testDef) check(p Params) error {
	for i := range t.params {
		d := &t.params[i]
		v := d.text(&p)
		msg := ""
		if d.kind == kindSite {
			if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\n\r\t") {
				msg = "not a site"
			}
		} else {
			_, msg = d.parseValue(v, true)
		}
		if msg != "" {
			return fmt.Errorf("parameter %s %q: %s (allowed: %s)", d.name, v, msg, d.allowed())
		}
	}
	return nil
}

// CheckParams checks typed parameters of a test against its definition:
// every parameter the test takes within its limits (the client agent's
// check of what the runner hands it).
func CheckParams(test string, p Params) error {
	t := lookupTest(test)
	if t == nil {
		return fmt.Errorf("unknown test %q", test)
	}
	return t.check(p)
}

// ParamInfo describes one parameter of a test as its definition gives it.
type ParamInfo struct {
	Name    string
	Default string // the canonical default; "" when a plan must give it
	Allowed string // the values it accepts, as plan validation words them
	// Examples are valid values: the default and the limits (every value
	// of a choice; the generated sites of a site).
	Examples []string
}

// TestParams describes the parameters of a test in their canonical order
// (the order of a cell key's parameter list); nil for an unknown test.
func TestParams(test string) []ParamInfo {
	t := lookupTest(test)
	if t == nil {
		return nil
	}
	out := make([]ParamInfo, 0, len(t.params))
	for i := range t.params {
		d := &t.params[i]
		pi := ParamInfo{Name: d.name, Default: d.def, Allowed: d.allowed()}
		switch d.kind {
		case kindInt:
			pi.Examples = []string{strconv.FormatInt(d.min, 10), strconv.FormatInt(d.max, 10)}
		case kindSize:
			pi.Examples = []string{FormatSize(d.min), FormatSize(d.max)}
		case kindDuration:
			pi.Examples = []string{formatDuration(time.Duration(d.min)), formatDuration(time.Duration(d.max))}
		case kindEnum:
			pi.Examples = slices.Clone(d.enum)
		case kindSite:
			pi.Examples = slices.Clone(GeneratedSites)
		}
		if d.def != "" && !slices.Contains(pi.Examples, d.def) {
			pi.Examples = append([]string{d.def}, pi.Examples...)
		}
		out = append(out, pi)
	}
	return out
}

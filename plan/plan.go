// Package plan reads, validates and expands quicbench plans: YAML files that
// say which protocols to measure, over which emulated network scenarios
// (named link specs or grids of link parameters), with which tests and test
// parameters, how many times. It also carries the built-in plans, one per
// study design quicbench re-runs, plus "quick".
//
// The format is documented in docs/plan-format.md. A plan is parsed with
// Parse or Load (every problem is reported with its file:line:col, the field
// path, the bad value and what is allowed), and expanded into cells
// (model.Cell) with Expand: scenario x test x parameters x client x
// congestion control x protocol, in a deterministic order with stable keys.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// Defaults of plan-level fields.
const (
	DefaultIterations = 10
	DefaultTimeout    = 60 * time.Second
	DefaultSeed       = 1
	DefaultClient     = model.ClientBuiltin
	DefaultCC         = model.DefaultCC
)

// Limits that keep a plan's expansion bounded.
const (
	MaxIterations = 100000
	MaxCells      = 100000
	MaxScenarios  = 10000
)

// Plan is a validated plan. Name, Description, Seed and Timeout may be
// changed after parsing (for example to apply a --seed flag); everything
// else is fixed. Obtain one from Parse, Load, Builtin or Quick.
type Plan struct {
	Name        string        // plan name (default: the file name without extension)
	Description string        // what the plan measures
	Seed        uint64        // run seed: emulator seeds and protocol orders derive from it
	Timeout     time.Duration // default per-sample timeout (tests may override it)

	d         doc
	file      string
	points    []Scenario
	cells     []model.Cell
	timeouts  map[string]time.Duration // cell key -> test-level timeout override
	minIters  map[string]int           // cell key -> least iterations of an adaptive plan
	notes     []string
	source    []byte
	sourceSig string
}

// Scenario is one network condition of a plan: a named link spec or one
// point of a grid, with the canonical link spec of each direction.
type Scenario struct {
	Name    string
	Up      string         // link spec client->server (emu/spec canonical text), "" for none
	Down    string         // link spec server->client, "" for none
	Factors []model.Factor // grid coordinates (rate, delay, ...) for grid points, and FactorCompeting
	// Competing is the canonical traffic spec of the flows that share the
	// link with each sample (plan/competing.go), "" for none.
	Competing string
}

// Parse reads a plan from YAML. name is used in error messages (usually the
// file name) and as the plan name when the plan has none. Relative trace and
// site paths are kept as written (Load resolves them against the plan's
// directory). An invalid plan returns an ErrorList.
func Parse(name string, data []byte) (*Plan, error) {
	return parse(name, data, "")
}

// Load reads and parses the plan file at path. Relative trace file and site
// directory paths in the plan are resolved against the plan file's directory
// and must exist.
func Load(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return parse(path, data, dir)
}

func parse(name string, data []byte, baseDir string) (*Plan, error) {
	d := &decoder{file: name, baseDir: baseDir}
	doc, ok := d.decode(data)
	if !ok {
		return nil, d.errs.sorted()
	}
	if doc.name == "" {
		base := filepath.Base(name)
		doc.name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	p := &Plan{Name: doc.name, Description: doc.description, Seed: doc.seed, Timeout: doc.timeout, d: *doc, file: name}
	if errs := p.build(); len(errs) > 0 {
		return nil, errs.sorted()
	}
	if !doc.resolved {
		// The text says exactly what the plan means: keep it, comments and all.
		p.source = append([]byte(nil), data...)
		p.sourceSig = p.signature()
	}
	return p, nil
}

// build computes the scenarios and cells of the plan's document.
func (p *Plan) build() ErrorList {
	e := &expander{p: p, file: p.file}
	e.run()
	return e.errs
}

// Expand returns the plan's cells in a deterministic order: scenarios in
// plan order (grid points with the first dimension varying slowest), then
// tests in plan order, then parameter combinations (first parameter slowest),
// clients, congestion controls and protocols in the order listed. Keys are
// "scenario/test/param=value,.../protocol/client/cc" and Group is the key
// without the protocol. The error is non-nil only for a Plan not obtained
// from this package.
func (p *Plan) Expand() ([]model.Cell, error) {
	if p == nil || p.cells == nil {
		return nil, fmt.Errorf("plan: Expand on a plan that was not parsed")
	}
	out := make([]model.Cell, len(p.cells))
	copy(out, p.cells)
	for i := range out {
		out[i].Factors = append([]model.Factor(nil), p.cells[i].Factors...)
	}
	return out, nil
}

// Scenarios returns the plan's network scenarios in order, grid blocks
// expanded into their points.
func (p *Plan) Scenarios() []Scenario {
	out := make([]Scenario, len(p.points))
	for i, s := range p.points {
		s.Factors = append([]model.Factor(nil), s.Factors...)
		out[i] = s
	}
	return out
}

// Notes returns what the plan's expansion left out on purpose, one line per
// reason: for example a plan-level protocol that a test cannot run (raw tcp
// in a page test), which is skipped for that test rather than failing.
func (p *Plan) Notes() []string { return append([]string(nil), p.notes...) }

// TimeoutFor returns the per-sample timeout of a cell: its test's timeout
// when the plan sets one, else the plan's Timeout.
func (p *Plan) TimeoutFor(c *model.Cell) time.Duration {
	if t, ok := p.timeouts[c.Key]; ok {
		return t
	}
	return p.Timeout
}

// Precision returns the adaptive iteration target of the plan: a group of
// cells stops iterating once every protocol pair's 95% interval of the
// paired median difference is narrower than plus or minus this percentage of
// the pair's median (stats.GroupPrecision), after at least
// MinIterationsFor its cells and at most their Iterations. 0 for a plan of
// fixed iterations.
func (p *Plan) Precision() float64 { return p.d.precision }

// MinEffect returns the plan's smallest effect of interest (its min_effect
// field) as a percentage of the reference median, and whether the plan sets
// it; 0 turns the rule off. The report calls a difference whose 95%
// interval lies within plus or minus this share negligible
// (stats.Config.MinEffect; docs/statistics.md). It does not enter the
// plan's Hash: it changes how samples are judged, not which are taken.
func (p *Plan) MinEffect() (pct float64, set bool) { return p.d.minEffect, p.d.minEffectSet }

// Parallel returns the testbeds the plan asks a run to keep active at once
// (its parallel field; quicbench run --parallel overrides it), or 0 when
// the plan does not say: then a run takes one sample at a time. The
// admission rule (Admission) may run fewer. It does not enter the plan's
// Hash: parallelism changes when samples are taken, not which.
func (p *Plan) Parallel() int { return p.d.parallel }

// Pin reports whether the plan pins the emulator, the server and the client
// to CPUs of their own (plan field pin; netns.PinLayout says where on a
// given machine). A pinned plan runs one testbed at a time.
func (p *Plan) Pin() bool { return p.d.pin }

// MinIterationsFor returns the least counted iterations of a cell: its
// test's (or the plan's) iterations. For a plan of fixed iterations it is
// the cell's Iterations.
func (p *Plan) MinIterationsFor(c *model.Cell) int {
	if n, ok := p.minIters[c.Key]; ok {
		return n
	}
	return c.Iterations
}

// WithPrecision returns the plan with adaptive iterations: the precision
// target pct (percent of the median) and at most maxIter iterations per
// group (0: the plan's max_iterations, or its default). pct 0 returns the
// plan with fixed iterations.
func (p *Plan) WithPrecision(pct float64, maxIter int) (*Plan, error) {
	if p == nil || p.cells == nil {
		return nil, fmt.Errorf("plan: WithPrecision on a plan that was not parsed")
	}
	if pct < 0 || pct > 100 || maxIter < 0 || maxIter > MaxIterations {
		return nil, fmt.Errorf("plan: precision %v%% (want more than 0%%, at most 100%%) or max_iterations %d out of range", pct, maxIter)
	}
	d := p.d.clone()
	switch {
	case pct == 0:
		maxIter = 0
	case maxIter == 0 && p.d.precision > 0:
		maxIter = p.d.maxIterations
	case maxIter == 0:
		maxIter = defaultMaxIterations(&d)
	}
	d.precision, d.maxIterations, d.maxIterAt = pct, maxIter, pos{}
	q := &Plan{Name: p.Name, Description: p.Description, Seed: p.Seed, Timeout: p.Timeout, d: d}
	return Parse(p.file, q.render())
}

// Counts are the sizes of a plan's expansion.
type Counts struct {
	Cells   int // measured combinations
	Samples int // counted samples (sum of iterations)
	Warmups int // uncounted warm-up samples
}

// Total is the number of samples a full run takes, warm-ups included.
func (c Counts) Total() int { return c.Samples + c.Warmups }

// Count sums the samples of cells (for progress and ETA).
func Count(cells []model.Cell) Counts {
	var c Counts
	for i := range cells {
		c.Cells++
		c.Samples += cells[i].Iterations
		if cells[i].Warmup {
			c.Warmups++
		}
	}
	return c
}

// Counts returns the plan's cell and sample counts.
func (p *Plan) Counts() Counts { return Count(p.cells) }

// Hash returns the hex SHA-256 of a canonical form of what the plan
// measures: the seed, whether it pins the endpoints to CPUs, and every
// cell's key (which names a server other than quicbench's), link specs,
// factors, metric, iterations, warm-up and timeout, in order. It ignores comments,
// formatting, key order, equivalent spellings (1000KB and 1MB), the name and
// the description. A run can only be resumed with a plan of the same hash.
func (p *Plan) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "quicbench-plan-v1\nseed=%d\n", p.Seed)
	if p.d.pin {
		// pinned endpoints compete for other CPUs than unpinned ones
		fmt.Fprintf(h, "pin\n")
	}
	if p.d.missingBodies == MissingFill {
		// recorded pages' missing bodies are served as filler
		fmt.Fprintf(h, "missing_bodies=fill\n")
	}
	if p.d.browserRestart == BrowserRestartAlways {
		// a fresh browser per sample, not a fresh context in a kept one
		fmt.Fprintf(h, "browser_restart=always\n")
	}
	if p.d.precision > 0 {
		// adaptive: the rule decides how many samples each group gets
		fmt.Fprintf(h, "precision=%g\n", p.d.precision)
		for i := range p.cells {
			fmt.Fprintf(h, "min %s %d\n", p.cells[i].Key, p.MinIterationsFor(&p.cells[i]))
		}
	}
	for _, st := range p.d.stacks {
		// what a contract stack runs is part of what was measured
		fmt.Fprintf(h, "stack %s %s %v\n", st.Name, st.Command, st.Roles())
	}
	for i := range p.cells {
		c := &p.cells[i]
		fmt.Fprintf(h, "cell\n%s\n%s\n%s\n%s\n%s\n", c.Key, c.Group, c.Scenario, c.LinkUp, c.LinkDown)
		for _, f := range c.Factors {
			fmt.Fprintf(h, "f %s=%s\n", f.Name, f.Value)
		}
		fmt.Fprintf(h, "%s %s %s %s %s %s %t %d %t %d\n", c.Test, c.Protocol, c.Client, c.CC, c.Metric,
			c.Unit, c.HigherIsBetter, c.Iterations, c.Warmup, p.TimeoutFor(c))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// signature identifies the plan's current content including name and
// description, to tell whether YAML may still return the source text.
func (p *Plan) signature() string {
	return p.Hash() + "\x00" + p.Name + "\x00" + p.Description + "\x00" + strconv.FormatInt(int64(p.Timeout), 10)
}

// Stacks returns the contract stacks the plan declares (stacks:), whose
// commands a run would execute: the runner refuses them unless the user
// allows commands.
func (p *Plan) Stacks() []*peers.Stack { return slices.Clone(p.d.stacks) }

// YAML returns the plan as YAML: the text it was parsed from (comments
// included) when the plan has not been changed since, else a canonical
// rendering that parses back to the same plan (same Expand, same Hash).
func (p *Plan) YAML() []byte {
	if p.source != nil && p.signature() == p.sourceSig {
		return bytes.Clone(p.source)
	}
	return p.render()
}

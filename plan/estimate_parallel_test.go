package plan

import (
	"strings"
	"testing"
	"time"
)

// parsePlan parses a plan's YAML; an error ends the test.
func parsePlan(t *testing.T, yaml string) *Plan {
	t.Helper()
	p, err := Parse("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// estimates returns a plan's Estimate and its EstimateWith(n).
func estimates(t *testing.T, p *Plan, n int) (serial Estimate, par Estimate) {
	t.Helper()
	serial, err := p.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	par, err = p.EstimateWith(n)
	if err != nil {
		t.Fatal(err)
	}
	if par.Total != serial.Total || len(par.Cells) != len(serial.Cells) {
		t.Errorf("EstimateWith(%d) total %v, Estimate %v", n, par.Total, serial.Total)
	}
	if d, err := p.EstimateParallel(n); err != nil || d != par.Parallel {
		t.Errorf("EstimateParallel(%d) = %v, %v; EstimateWith: %v", n, d, err, par.Parallel)
	}
	return serial, par
}

// fourGroups is a plan of four groups (scenarios) of one iteration each,
// h2 and h3 downloading 1 MB over a 10 Mbit/s link: 0.04 CPU a block.
const fourGroups = `
iterations: 1
warmup: false
protocols: [h2, h3]
scenarios:
  - {name: a, link: "rate 10mbit delay 10ms"}
  - {name: b, link: "rate 10mbit delay 10ms"}
  - {name: c, link: "rate 10mbit delay 10ms"}
  - {name: d, link: "rate 10mbit delay 10ms"}
tests:
  - test: download
    params: {size: 1MB}
`

func TestEstimateParallelLinkBound(t *testing.T) {
	p := parsePlan(t, fourGroups)
	serial, par := estimates(t, p, 4)
	if serial.Parallel != serial.Total || serial.ParallelN != 1 {
		t.Errorf("Estimate: Parallel %v with %d, want the total %v with 1", serial.Parallel, serial.ParallelN, serial.Total)
	}
	// Four equal blocks on four testbeds: a quarter of the serial time.
	if par.Parallel != serial.Total/4 || par.ParallelN != 4 {
		t.Errorf("4 testbeds: %v with %d, want %v (total %v)", par.Parallel, par.ParallelN, serial.Total/4, serial.Total)
	}
	// Two testbeds: a half; more than four: still a quarter; the slots
	// are capped at MaxParallel(RefCores).
	if _, par := estimates(t, p, 2); par.Parallel != serial.Total/2 {
		t.Errorf("2 testbeds: %v, want %v", par.Parallel, serial.Total/2)
	}
	if _, par := estimates(t, p, 1000); par.Parallel != serial.Total/4 || par.ParallelN != MaxParallel(RefCores) {
		t.Errorf("1000 testbeds: %v with %d, want %v with %d", par.Parallel, par.ParallelN, serial.Total/4, MaxParallel(RefCores))
	}
	// One testbed or less: the serial estimate.
	for _, n := range []int{1, 0, -3} {
		if d, err := p.EstimateParallel(n); err != nil || d != serial.Total {
			t.Errorf("EstimateParallel(%d) = %v, %v; want %v", n, d, err, serial.Total)
		}
	}
	if !strings.HasSuffix(par.String(), "with 4 testbeds)") || serial.String() != FormatEstimate(serial.Total) {
		t.Errorf("String: %q, %q", par.String(), serial.String())
	}
}

func TestEstimateParallelBudget(t *testing.T) {
	// 10 MB over 30 Mbit/s, HTTP/3: a block takes a share of the budget
	// such that only k of the four fit at once; they take ceil(4/k) rounds.
	p := parsePlan(t, strings.ReplaceAll(strings.ReplaceAll(fourGroups, "rate 10mbit delay 10ms", "rate 30mbit delay 1ms"), "1MB", "10MB"))
	var most float64
	for i := range p.cells {
		l, err := CellLoad(&p.cells[i])
		if err != nil || l.Exclusive {
			t.Fatalf("%s: %+v, %v", p.cells[i].Key, l, err)
		}
		most = max(most, l.CPU)
	}
	k := int(LoadBudget(RefCores) / most)
	if k < 1 || k > 3 {
		t.Fatalf("%.3f CPU per block: %d fit in the budget; the test wants 1 to 3", most, k)
	}
	serial, par := estimates(t, p, 16)
	rounds := (4 + k - 1) / k
	if want := serial.Total / 4 * time.Duration(rounds); par.Parallel < want-time.Microsecond || par.Parallel > want+time.Microsecond {
		t.Errorf("%d blocks fit at once: parallel %v, want %d rounds, %v (serial %v)", k, par.Parallel, rounds, want, serial.Total)
	}
}

func TestEstimateParallelExclusive(t *testing.T) {
	// The cpu test's cell is exclusive: it runs alone, first, and adds its
	// full time to the four download blocks running side by side.
	p := parsePlan(t, fourGroups+`  - test: cpu
    scenarios: [a]
    params: {size: 10MB}
`)
	serial, par := estimates(t, p, 16)
	var cpu, dl time.Duration
	for _, c := range serial.Cells {
		if strings.Contains(c.Key, "/cpu/") {
			cpu += c.Total()
		} else {
			dl += c.Total()
		}
	}
	if cpu == 0 || par.Parallel != cpu+dl/4 {
		t.Errorf("parallel %v, want the cpu test's %v plus a quarter of the downloads' %v", par.Parallel, cpu, dl)
	}
	// An unlimited link is exclusive too: nothing to gain.
	p = parsePlan(t, strings.ReplaceAll(fourGroups, `"rate 10mbit delay 10ms"`, `""`))
	if serial, par := estimates(t, p, 16); par.Parallel != serial.Total {
		t.Errorf("unlimited links: parallel %v, want the serial %v", par.Parallel, serial.Total)
	}
}

func TestEstimateParallelAdaptive(t *testing.T) {
	// Adaptive: a group's blocks run one at a time, so the two groups of
	// four iterations (counted at max_iterations) take half the total,
	// where the same plan of fixed iterations runs all eight at once.
	const body = `
iterations: 4
warmup: false
protocols: [h2, h3]
scenarios:
  - {name: a, link: "rate 2mbit delay 10ms"}
  - {name: b, link: "rate 2mbit delay 10ms"}
tests:
  - test: download
    params: {size: 1MB}
`
	fixed := parsePlan(t, body)
	serial, par := estimates(t, fixed, 16)
	if par.Parallel != serial.Total/8 {
		t.Errorf("fixed: %v, want %v", par.Parallel, serial.Total/8)
	}
	adaptive := parsePlan(t, strings.Replace(body, "iterations: 4", "iterations: 2\nprecision: 5%\nmax_iterations: 4", 1))
	aserial, apar := estimates(t, adaptive, 16)
	if aserial.Total != serial.Total || apar.Parallel != serial.Total/2 {
		t.Errorf("adaptive: total %v parallel %v, want %v and %v", aserial.Total, apar.Parallel, serial.Total, serial.Total/2)
	}
}

func TestEstimateParallelWarmup(t *testing.T) {
	// Warm-up blocks follow runner.Schedule: iteration -1 with the cells
	// that have a warm-up. Two groups, warm-up and one iteration each,
	// on four testbeds: all four blocks at once.
	p := parsePlan(t, `
iterations: 1
warmup: true
protocols: [h2, h3]
scenarios:
  - {name: a, link: "rate 10mbit delay 10ms"}
  - {name: b, link: "rate 10mbit delay 10ms"}
tests:
  - test: download
    params: {size: 1MB}
`)
	serial, par := estimates(t, p, 4)
	if par.Parallel != serial.Total/4 {
		t.Errorf("parallel %v, want %v", par.Parallel, serial.Total/4)
	}
	runs, blocks := p.blockRuns(make([]time.Duration, len(p.cells)), make([]SampleLoad, len(p.cells)))
	if blocks != 4 || len(runs) != 4 {
		t.Errorf("%d blocks in %d runs, want 4 in 4", blocks, len(runs))
	}
}

func TestEstimateParallelFluid(t *testing.T) {
	// Beyond maxSimBlocks the estimate spreads each run of identical
	// blocks over the testbeds the budget allows: it agrees with the
	// replay where both apply.
	const body = `
iterations: ITER
warmup: false
protocols: [h2, h3]
scenarios:
  - {name: a, link: "rate 10mbit delay 10ms"}
  - {name: b, link: "rate 200mbit delay 10ms"}
  - {name: c, link: "rate 10mbit delay 10ms"}
tests:
  - test: ttfb
`
	p := parsePlan(t, strings.Replace(body, "ITER", "20000", 1))
	e, err := p.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	sample := make([]time.Duration, len(e.Cells))
	loads := make([]SampleLoad, len(e.Cells))
	for i, c := range e.Cells {
		sample[i] = c.Sample
		loads[i], _ = CellLoad(&p.cells[i])
	}
	runs, blocks := p.blockRuns(sample, loads)
	if blocks != 60000 || len(runs) != 3 {
		t.Fatalf("%d blocks in %d runs", blocks, len(runs))
	}
	var all []pblock
	for _, r := range runs {
		for range r.count {
			all = append(all, r.pblock)
		}
	}
	adm := Admission{Slots: 16, Budget: LoadBudget(RefCores)}
	sim, fluid := simulateParallel(all, adm, false, nil), parallelFluid(runs, adm, false)
	if r := float64(fluid) / float64(sim); r < 0.97 || r > 1.03 {
		t.Errorf("fluid %v, replay %v", fluid, sim)
	}

	// 100,000 iterations of three groups: the fluid estimate, fast.
	p = parsePlan(t, strings.Replace(body, "ITER", "100000", 1))
	start := time.Now()
	serial, par := estimates(t, p, 16)
	if par.Parallel <= 0 || par.Parallel >= serial.Total/4 || time.Since(start) > 5*time.Second {
		t.Errorf("100,000 iterations: %v of %v in %v", par.Parallel, serial.Total, time.Since(start))
	}
}

func TestEstimateParallelBuiltins(t *testing.T) {
	studies := map[string]bool{"degraded-networks": true, "page-load-grid": true, "three-sites": true, "image-transfer": true, "size-bandwidth-grid": true}
	var serial, par time.Duration
	for _, name := range BuiltinNames() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		e, err := p.EstimateWith(MaxParallel(RefCores))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-20s serial %-6s parallel %-6s (%d testbeds; computed in %v)", name, FormatEstimate(e.Total), FormatEstimate(e.Parallel), e.ParallelN, took.Round(time.Millisecond))
		if e.Parallel <= 0 || e.Parallel > e.Total || e.ParallelN != MaxParallel(RefCores) {
			t.Errorf("%s: parallel %v with %d, serial %v", name, e.Parallel, e.ParallelN, e.Total)
		}
		if took > 2*time.Second {
			t.Errorf("%s: EstimateWith took %v", name, took)
		}
		if d, _ := p.EstimateParallel(1); d != e.Total {
			t.Errorf("%s: EstimateParallel(1) = %v, want %v", name, d, e.Total)
		}
		if studies[name] {
			serial += e.Total
			par += e.Parallel
		}
	}
	t.Logf("the five studies: serial %s, parallel %s", FormatEstimate(serial), FormatEstimate(par))
	if par <= 0 || par > serial {
		t.Errorf("studies: parallel %v, serial %v", par, serial)
	}
	// page-load-grid's links are rate-limited and light: it gains most.
	p, _ := Builtin("page-load-grid")
	if e, _ := p.EstimateWith(16); e.Parallel > e.Total/8 {
		t.Errorf("page-load-grid: parallel %v of %v", e.Parallel, e.Total)
	}
}

func TestEstimateShard(t *testing.T) {
	p := parsePlan(t, strings.Replace(fourGroups, "iterations: 1", "iterations: 3", 1))
	whole, err := p.EstimateWith(4)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := p.EstimateShard(4, Shard{}); err != nil || e.Total != whole.Total || e.Parallel != whole.Parallel {
		t.Errorf("the zero shard: %+v, %v; want the whole plan's %v and %v", e, err, whole.Total, whole.Parallel)
	}
	// 12 equal blocks in 3 shards of 4: each a third of the total, and on
	// 4 testbeds one block's time.
	var total time.Duration
	samples := 0
	for k := 1; k <= 3; k++ {
		e, err := p.EstimateShard(4, Shard{K: k, N: 3})
		if err != nil {
			t.Fatal(err)
		}
		total += e.Total
		for _, c := range e.Cells {
			samples += c.Samples
		}
		if e.Total != whole.Total/3 || e.Parallel != whole.Total/12 || e.ParallelN != 4 {
			t.Errorf("shard %d/3: total %v, parallel %v with %d; want %v and %v with 4", k, e.Total, e.Parallel, e.ParallelN, whole.Total/3, whole.Total/12)
		}
		if one, _ := p.EstimateShard(1, Shard{K: k, N: 3}); one.Parallel != one.Total || one.ParallelN != 1 {
			t.Errorf("shard %d/3 on one testbed: %v of %v", k, one.Parallel, one.Total)
		}
	}
	if total != whole.Total || samples != p.Counts().Total() {
		t.Errorf("the shards: %v and %d samples; the plan %v and %d", total, samples, whole.Total, p.Counts().Total())
	}
	if _, err := p.EstimateShard(4, Shard{K: 4, N: 3}); err == nil {
		t.Error("shard 4/3: want an error")
	}
}

func TestBlockEndsFollowTheEstimate(t *testing.T) {
	p, err := Builtin("parallel-check")
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.EstimateWith(16)
	if err != nil {
		t.Fatal(err)
	}
	sample := make([]time.Duration, len(e.Cells))
	for i, c := range e.Cells {
		sample[i] = c.Sample
	}
	loads := make([]SampleLoad, len(p.cells))
	for i := range p.cells {
		if loads[i], err = CellLoad(&p.cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	runs, _ := p.blockRuns(sample, loads)
	var blocks []ReplayBlock
	for _, r := range runs {
		for range r.count {
			blocks = append(blocks, ReplayBlock{Group: r.group, Duration: r.dur, Load: r.load})
		}
	}
	starts, ends := BlockEnds(blocks, RefAdmission(16, p.cells), false)
	last := time.Duration(0)
	for i := range blocks {
		if ends[i]-starts[i] != blocks[i].Duration || starts[i] < 0 {
			t.Fatalf("block %d: %v to %v, want its %v", i, starts[i], ends[i], blocks[i].Duration)
		}
		last = max(last, ends[i])
	}
	if last != e.Parallel {
		t.Errorf("last block ends at %v, the estimate with 16 testbeds is %v", last, e.Parallel)
	}
}

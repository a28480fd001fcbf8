package plan

import (
	"container/heap"
	"fmt"
	"math"
	"time"

	"github.com/quicbench/quicbench/model"
)

// maxSimBlocks is the most blocks EstimateParallel simulates one by one.
// A plan beyond it (up to MaxCells groups of 100,000 iterations each)
// gets the fluid approximation of parallelFluid instead: its memory and
// time would otherwise grow with its samples. The built-in plans have at
// most about 15,000 blocks.
const maxSimBlocks = 1 << 18

// EstimateWith is Estimate plus the estimated duration of a run that keeps
// up to n testbeds active at once (quicbench run --parallel n) in Parallel,
// and the testbeds the admission rule allows the reference machine in
// ParallelN: min(n, MaxParallel(RefCores)), at least 1.
func (p *Plan) EstimateWith(n int) (Estimate, error) {
	e, err := p.Estimate()
	if err != nil || n <= 1 {
		return e, err
	}
	sample := make([]time.Duration, len(e.Cells))
	for i, c := range e.Cells {
		sample[i] = c.Sample
	}
	d, slots, err := p.estimateParallel(n, sample)
	if err != nil {
		return Estimate{}, err
	}
	e.Parallel, e.ParallelN = d, slots
	return e, nil
}

// EstimateParallel estimates the duration of a full run of the plan with
// up to n testbeds at once (quicbench run --parallel n) on the reference
// machine (RefCores CPUs). It replays the parallel run's dispatch: the
// run's blocks (the samples of one iteration of one cell group, as the
// runner's schedule groups them, taken one after the other on one
// testbed; a block lasts the sum of its samples' EstimateCell and loads
// the machine as the most of its cells' CellLoad) in ParallelOrder, each
// started as soon as a testbed is free and Admission{Slots:
// min(n, MaxParallel(RefCores)), Budget: LoadBudget(RefCores)} admits it
// beside the running ones; a pending exclusive block that cannot start
// holds back the blocks after it; in an adaptive plan (Precision > 0) a
// group's blocks run one at a time, in that order, and every group is
// counted at its maximum iterations as Estimate counts it. n <= 1 returns
// Estimate's Total. See docs/plan-format.md, "Parallel testbeds".
func (p *Plan) EstimateParallel(n int) (time.Duration, error) {
	e, err := p.EstimateWith(n)
	return e.Parallel, err
}

// RefAdmission is the admission rule of a run of cells with up to n
// testbeds on the reference machine: Slots min(n, MaxParallel(RefCores))
// and what MemoryLimits allows with RefMemAvailable, Budget
// LoadBudget(RefCores).
func RefAdmission(n int, cells []model.Cell) Admission {
	slots, browsers := MemoryLimits(RefMemAvailable, min(n, MaxParallel(RefCores)), cells)
	return Admission{Slots: slots, Budget: LoadBudget(RefCores), Browsers: browsers}
}

// pblock is one block of the parallel estimate.
type pblock struct {
	group int
	dur   time.Duration
	load  SampleLoad
}

// blockRun is a run of count identical blocks: consecutive iterations of
// one group in which the same cells take part.
type blockRun struct {
	pblock
	count int
}

// estimateParallel is EstimateParallel for n > 1 with the estimate of one
// sample of each of the plan's cells; it returns the testbeds it used.
func (p *Plan) estimateParallel(n int, sample []time.Duration) (time.Duration, int, error) {
	loads := make([]SampleLoad, len(p.cells))
	for i := range p.cells {
		l, err := CellLoad(&p.cells[i])
		if err != nil {
			return 0, 0, err
		}
		loads[i] = l
	}
	runs, blocks := p.blockRuns(sample, loads)
	adm := RefAdmission(n, p.cells)
	adaptive := p.Precision() > 0
	if blocks > maxSimBlocks {
		return parallelFluid(runs, adm, adaptive), adm.Slots, nil
	}
	all := make([]pblock, 0, blocks)
	for _, r := range runs {
		for range r.count {
			all = append(all, r.pblock)
		}
	}
	return simulateParallel(all, adm, adaptive, nil), adm.Slots, nil
}

// ReplayBlock is a block of a parallel run to replay with BlockEnds: its
// group (blocks of one group share it), its estimated duration and its
// predicted load.
type ReplayBlock struct {
	Group    int
	Duration time.Duration
	Load     SampleLoad
}

// BlockEnds replays a parallel run of blocks (in schedule order) as
// EstimateParallel replays a plan's, under the admission rule adm (in an
// adaptive run a group's blocks run one at a time), and returns when
// each block starts and ends, by index. The runner's ETA follows a run
// along it.
func BlockEnds(blocks []ReplayBlock, adm Admission, adaptive bool) (starts, ends []time.Duration) {
	all := make([]pblock, len(blocks))
	for i, b := range blocks {
		all[i] = pblock{group: b.Group, dur: b.Duration, load: b.Load}
	}
	starts, ends = make([]time.Duration, len(blocks)), make([]time.Duration, len(blocks))
	simulateParallel(all, adm, adaptive, func(i int, start, end time.Duration) {
		starts[i], ends[i] = start, end
	})
	return starts, ends
}

// blockRuns groups the plan's cells into the blocks of runner.Schedule, in
// its order: groups in order of first appearance; in each, the warm-up
// iteration (-1) when any cell has a warm-up, then iterations 0 up to the
// largest Iterations; a cell takes part in the warm-up when it has one and
// in iteration i when i < its Iterations. Consecutive iterations with the
// same cells are returned as one run; blocks counts them all, saturating.
func (p *Plan) blockRuns(sample []time.Duration, loads []SampleLoad) (runs []blockRun, blocks int) {
	var order []string
	members := map[string][]int{}
	for i := range p.cells {
		g := p.cells[i].Group
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	add := func(g int, cells []int, count int, in func(int) bool) {
		r := blockRun{pblock: pblock{group: g}, count: count}
		any := false
		for _, i := range cells {
			if !in(i) {
				continue
			}
			any = true
			r.dur = addSat(r.dur, sample[i])
			r.load.CPU = math.Max(r.load.CPU, loads[i].CPU)
			if loads[i].Exclusive && !r.load.Exclusive {
				r.load.Exclusive, r.load.Reason = true, loads[i].Reason
			}
			r.load.Browser = r.load.Browser || loads[i].Browser
		}
		if any && count > 0 {
			runs = append(runs, r)
			if blocks > math.MaxInt-count {
				blocks = math.MaxInt
			} else {
				blocks += count
			}
		}
	}
	for g, name := range order {
		cells := members[name]
		warm := false
		var ends []int // the distinct Iterations of the group's cells, ascending
		for _, i := range cells {
			c := &p.cells[i]
			warm = warm || c.Warmup
			ends = insertSorted(ends, c.Iterations)
		}
		if warm {
			add(g, cells, 1, func(i int) bool { return p.cells[i].Warmup })
		}
		from := 0
		for _, end := range ends {
			if end <= from {
				continue
			}
			add(g, cells, end-from, func(i int) bool { return from < p.cells[i].Iterations })
			from = end
		}
	}
	return runs, blocks
}

// insertSorted adds v to the ascending list s unless it holds it.
func insertSorted(s []int, v int) []int {
	for i, x := range s {
		if x == v {
			return s
		}
		if x > v {
			return append(s[:i], append([]int{v}, s[i:]...)...)
		}
	}
	return append(s, v)
}

// simulateParallel replays a parallel run of blocks (in schedule order)
// and returns when its last block ends. Events are the ends of blocks: at
// each, the pending blocks are scanned in ParallelOrder and each one the
// admission rule accepts starts; an exclusive block it does not accept
// ends the scan. The first block the scan would consider that fits the
// budget left is found in segment trees of the pending blocks' CPU
// (exclusive ones count 0, so that they are found where they stand): one
// of the blocks in a browser (not exclusive), searched only while the
// rule admits another browser, and one of all others; so the replay
// takes O(blocks · log blocks). started, when not nil, is told each
// block's index, start and end as it starts.
func simulateParallel(blocks []pblock, adm Admission, adaptive bool, started func(i int, start, end time.Duration)) time.Duration {
	if len(blocks) == 0 {
		return 0
	}
	pb := make([]Block, len(blocks))
	for i, b := range blocks {
		pb[i] = Block{Exclusive: b.load.Exclusive, Duration: b.dur}
	}
	order := ParallelOrder(pb)
	trees := [2]*minTree{newMinTree(len(order)), newMinTree(len(order))}
	// set sets a pending block's value in its tree: 1 for a block in a
	// browser that is not exclusive, 0 for the others.
	set := func(pos int, v float64) {
		b := blocks[order[pos]]
		t := 0
		if b.load.Browser && !b.load.Exclusive {
			t = 1
		}
		trees[t].set(pos, v)
	}
	// leaf is a pending, startable block's value.
	leaf := func(pos int) float64 {
		if b := blocks[order[pos]]; !b.load.Exclusive {
			return b.load.CPU
		}
		return 0
	}
	// In an adaptive plan only the first pending block of a group whose
	// block is not running may start: queue holds each group's pending
	// positions in order.
	var queue map[int][]int
	if adaptive {
		queue = map[int][]int{}
		for pos, bi := range order {
			g := blocks[bi].group
			if len(queue[g]) == 0 {
				set(pos, leaf(pos))
			}
			queue[g] = append(queue[g], pos)
		}
	} else {
		for pos := range order {
			set(pos, leaf(pos))
		}
	}

	running := sliceHeap[runEntry]{less: func(a, b runEntry) bool { return a.end < b.end }}
	var now, end time.Duration
	var skipped []int
	loads := make([]SampleLoad, 0, adm.Slots)
	start := func(pos int) {
		b := blocks[order[pos]]
		set(pos, math.Inf(1))
		if adaptive {
			queue[b.group] = queue[b.group][1:]
		}
		e := addSat(now, b.dur)
		end = max(end, e)
		if started != nil {
			started(order[pos], now, e)
		}
		heap.Push(&running, runEntry{end: e, group: b.group, load: b.load})
	}
	for {
		// Start what the admission rule accepts, in order.
		for running.Len() < adm.Slots {
			loads = loads[:0]
			cpu, excl, browsers := 0.0, false, 0
			for _, r := range running.items {
				loads = append(loads, r.load)
				cpu += r.load.CPU
				excl = excl || r.load.Exclusive
				if r.load.Browser {
					browsers++
				}
			}
			if excl {
				break
			}
			limit := math.MaxFloat64 // an idle machine admits any block
			if running.Len() > 0 {
				limit = adm.Budget - cpu + 1e-9
			}
			pos := trees[0].leftmost(limit)
			if running.Len() == 0 || adm.Browsers <= 0 || browsers < adm.Browsers {
				if q := trees[1].leftmost(limit); q >= 0 && (pos < 0 || q < pos) {
					pos = q
				}
			}
			if pos < 0 {
				break
			}
			b := blocks[order[pos]]
			if b.load.Exclusive && running.Len() > 0 {
				break // the barrier: it runs alone once the others end
			}
			if !adm.Admit(loads, b.load) {
				// The tree's sum rounded differently: skip it in this scan.
				set(pos, math.Inf(1))
				skipped = append(skipped, pos)
				continue
			}
			start(pos)
			if b.load.Exclusive {
				break
			}
		}
		for _, pos := range skipped {
			set(pos, leaf(pos))
		}
		skipped = skipped[:0]
		if running.Len() == 0 {
			return end // nothing runs and nothing started: all done
		}
		// The next end of a block, and every block ending with it.
		now = running.items[0].end
		for running.Len() > 0 && running.items[0].end == now {
			r := heap.Pop(&running).(runEntry)
			if adaptive {
				if q := queue[r.group]; len(q) > 0 {
					set(q[0], leaf(q[0]))
				}
			}
		}
	}
}

// parallelFluid approximates simulateParallel for a plan of too many
// blocks to replay: exclusive blocks one after the other, each other run
// of identical blocks spread over as many testbeds as the slots and the
// budget allow (one at a time in an adaptive plan, whose blocks of a
// group do not overlap), and at least the longest group's blocks end to
// end in an adaptive plan (the longest block otherwise).
func parallelFluid(runs []blockRun, adm Admission, adaptive bool) time.Duration {
	var total, longest time.Duration
	chain := map[int]time.Duration{}
	for _, r := range runs {
		all := mulSat(r.dur, r.count)
		if adaptive {
			chain[r.group] = addSat(chain[r.group], all)
			longest = max(longest, chain[r.group])
		} else {
			longest = max(longest, r.dur)
		}
		if r.load.Exclusive {
			total = addSat(total, all)
			continue
		}
		conc := adm.Slots
		if r.load.CPU > 0 {
			conc = min(conc, int(adm.Budget/r.load.CPU))
		}
		if r.load.Browser && adm.Browsers > 0 {
			conc = min(conc, adm.Browsers)
		}
		if adaptive {
			conc = min(conc, r.count)
		}
		if all < estMax {
			all /= time.Duration(max(conc, 1))
		}
		total = addSat(total, all)
	}
	return max(total, longest)
}

// runEntry is a running block of the replay: when it ends, its group and
// its load.
type runEntry struct {
	end   time.Duration
	group int
	load  SampleLoad
}

// minTree is a segment tree of the minimum of n values (+Inf = absent)
// that finds the first value at most a limit.
type minTree struct {
	size int
	v    []float64
}

func newMinTree(n int) *minTree {
	size := 1
	for size < n {
		size *= 2
	}
	t := &minTree{size: size, v: make([]float64, 2*size)}
	for i := range t.v {
		t.v[i] = math.Inf(1)
	}
	return t
}

func (t *minTree) set(i int, x float64) {
	i += t.size
	t.v[i] = x
	for i /= 2; i >= 1; i /= 2 {
		t.v[i] = math.Min(t.v[2*i], t.v[2*i+1])
	}
}

// leftmost returns the first index whose value is at most limit, or -1.
func (t *minTree) leftmost(limit float64) int {
	if t.v[1] > limit {
		return -1
	}
	i := 1
	for i < t.size {
		if t.v[2*i] <= limit {
			i = 2 * i
		} else {
			i = 2*i + 1
		}
	}
	return i - t.size
}

// String writes the figures of an estimate: "12h", or "12h (1h30m with
// 16 testbeds)" when it has a parallel figure.
func (e Estimate) String() string {
	if e.ParallelN <= 1 {
		return FormatEstimate(e.Total)
	}
	return fmt.Sprintf("%s (%s with %d testbeds)", FormatEstimate(e.Total), FormatEstimate(e.Parallel), e.ParallelN)
}

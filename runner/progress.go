package runner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// ProgressMode selects how a run reports its progress.
type ProgressMode int

// Progress modes.
const (
	ProgressBar   ProgressMode = iota // a one-line bar on a terminal, redrawn in place
	ProgressLines                     // one plain line per sample (logs, CI)
	ProgressJSON                      // one JSON object per sample (scripts)
	ProgressQuiet                     // nothing
)

// Event is what the runner reports after each sample.
type Event struct {
	Done      int           `json:"done"`  // samples taken in this run, resumed ones included
	Total     int           `json:"total"` // samples planned
	Cell      string        `json:"cell"`
	Iteration int           `json:"iteration"`
	Warmup    bool          `json:"warmup"`
	Protocol  string        `json:"protocol"`
	Status    string        `json:"status"`
	Value     float64       `json:"value"`
	Unit      string        `json:"unit"`
	Error     string        `json:"error,omitempty"`
	Overhead  time.Duration `json:"overhead_ns"` // everything the sample cost outside its measured part
	Drain     time.Duration `json:"drain_ns"`    // of Overhead: waiting for the connections to close across the link
	Prep      time.Duration `json:"prep_ns"`     // of Overhead: the test's unmeasured preparation in the client
	Elapsed   time.Duration `json:"elapsed_ns"`
	ETA       time.Duration `json:"eta_ns"`
	// Testbed is the testbed that took the sample (0..N-1) and Concurrency
	// how many were taking samples while it ran, itself included.
	Testbed     int `json:"testbed"`
	Concurrency int `json:"concurrency"`
}

// progress renders events. Running medians are kept per protocol for the
// current cell group so a user sees the comparison take shape.
//
// A parallel run (slots > 1) interleaves the groups' samples: it keeps
// the medians of every group and shows those of the sample's group, and
// the line names the sample's testbed and how many were active.
type progress struct {
	w       io.Writer
	mode    ProgressMode
	slots   int // the run's parallelism; 0 or 1 for one testbed
	group   string
	running map[string][]float64
	groups  map[string]map[string][]float64 // parallel runs: running, per group
	unit    string
}

func newProgress(w io.Writer, mode ProgressMode) *progress {
	return &progress{w: w, mode: mode, running: map[string][]float64{}, groups: map[string]map[string][]float64{}}
}

func (p *progress) update(group string, ev Event) {
	switch {
	case p.slots > 1:
		if p.groups[group] == nil {
			p.groups[group] = map[string][]float64{}
		}
		p.running = p.groups[group]
	case group != p.group:
		p.group = group
		p.running = map[string][]float64{}
		if p.mode == ProgressBar {
			fmt.Fprintln(p.w)
		}
	}
	if ev.Status == "ok" && !ev.Warmup {
		p.running[ev.Protocol] = append(p.running[ev.Protocol], ev.Value)
	}
	p.unit = ev.Unit
	switch p.mode {
	case ProgressQuiet:
	case ProgressJSON:
		b, _ := json.Marshal(ev)
		fmt.Fprintf(p.w, "%s\n", b)
	case ProgressLines:
		fmt.Fprintf(p.w, "%s %s\n", p.counter(ev), p.describe(ev))
	default:
		const width = 24
		fill := 0
		if ev.Total > 0 {
			fill = ev.Done * width / ev.Total
		}
		bar := strings.Repeat("#", fill) + strings.Repeat(".", width-fill)
		fmt.Fprintf(p.w, "\r\033[K[%s] %s %s", bar, p.counter(ev), p.describe(ev))
	}
}

func (p *progress) counter(ev Event) string {
	eta := "?"
	if ev.ETA > 0 {
		eta = ev.ETA.Round(time.Second).String()
	}
	if p.slots > 1 {
		return fmt.Sprintf("%d/%d eta %s [testbed %d, %d/%d active]", ev.Done, ev.Total, eta, ev.Testbed, ev.Concurrency, p.slots)
	}
	return fmt.Sprintf("%d/%d eta %s", ev.Done, ev.Total, eta)
}

func (p *progress) describe(ev Event) string {
	it := fmt.Sprintf("it %d", ev.Iteration)
	if ev.Warmup {
		it = "warm-up"
	}
	s := fmt.Sprintf("%s %s", ev.Cell, it)
	if ev.Status != "ok" {
		s += " " + ev.Status
		if ev.Error != "" {
			s += ": " + firstLine(ev.Error, 60)
		}
	}
	protos := make([]string, 0, len(p.running))
	for k := range p.running {
		protos = append(protos, k)
	}
	sort.Strings(protos)
	var med []string
	for _, k := range protos {
		v := append([]float64(nil), p.running[k]...)
		sort.Float64s(v)
		med = append(med, fmt.Sprintf("%s %.4g", k, workload.NearestRank(v, 0.5)))
	}
	if len(med) > 0 {
		s += " | median " + strings.Join(med, ", ") + " " + p.unit
	}
	return s
}

func (p *progress) finish() {
	if p.mode == ProgressBar {
		fmt.Fprintln(p.w)
	}
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// start announces the run's estimated duration (plan.Estimate's model):
// of the whole plan, or for a resumed run of the samples left. It prints a
// line in the bar and lines modes; the JSON lines carry no start event and
// stay one record per sample.
//
// On several testbeds (slots > 1) it gives the parallel estimate first and
// the serial one beside it.
func (p *progress) start(todo, total int, estimate, parallel time.Duration) {
	if p.mode != ProgressBar && p.mode != ProgressLines {
		return
	}
	what := plural(total, "sample")
	if todo < total {
		what = fmt.Sprintf("%d of %s left", todo, what)
	}
	if p.slots > 1 {
		fmt.Fprintf(p.w, "estimated duration: %s on up to %d testbeds at once, %s one at a time (%s)\n",
			plan.FormatEstimate(parallel), p.slots, plan.FormatEstimate(estimate), what)
		return
	}
	fmt.Fprintf(p.w, "estimated duration: %s (%s)\n", plan.FormatEstimate(estimate), what)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// The ETA's correction of the estimate is bounded: one unusual sample (a
// timeout, a retransmission timeout on a tiny transfer) early in a run
// must not multiply the remaining time by a hundred.
const (
	etaMinRatio = 0.2
	etaMaxRatio = 5
)

// etaFrom estimates the time the samples still to take will need: their
// estimate (remainingEstimated), scaled by how long the samples taken so far
// in this invocation took (doneMeasured) against their estimate
// (doneEstimated), that ratio clamped to [etaMinRatio/slots, etaMaxRatio]
// (slots testbeds at once take samples up to slots times faster than
// their serial estimate). Before any sample finished it is the plain
// estimate divided by slots.
func etaFrom(doneMeasured, doneEstimated, remainingEstimated time.Duration, slots int) time.Duration {
	slots = max(slots, 1)
	if remainingEstimated <= 0 {
		return 0
	}
	if doneMeasured <= 0 || doneEstimated <= 0 {
		return remainingEstimated / time.Duration(slots)
	}
	r := min(max(float64(doneMeasured)/float64(doneEstimated), etaMinRatio/float64(slots)), etaMaxRatio)
	return time.Duration(float64(remainingEstimated) * r)
}

// progressCurve is the predicted course of a parallel run: how much of
// its serially estimated work the replay of its dispatch (plan.BlockEnds)
// has done by each instant, a sample's work counted when it ends, as the
// run counts it. A parallel run
// does not take its work at one pace (its exclusive blocks run first,
// alone), so its ETA follows the run along this curve rather than scaling
// the serial estimate left.
type progressCurve struct {
	at   []time.Duration // instants where samples end, ascending, from 0
	done []time.Duration // the work done by each
}

// sampleEnd is a sample of the replay: when it ends and its estimate.
type sampleEnd struct {
	at, work time.Duration
}

// newProgressCurve builds the curve of the replay's samples.
func newProgressCurve(ends []sampleEnd) *progressCurve {
	ends = slices.Clone(ends)
	slices.SortFunc(ends, func(a, b sampleEnd) int { return cmp.Compare(a.at, b.at) })
	c := &progressCurve{at: []time.Duration{0}, done: []time.Duration{0}}
	for _, e := range ends {
		last := len(c.at) - 1
		if e.at > c.at[last] {
			c.at = append(c.at, e.at)
			c.done = append(c.done, c.done[last])
			last++
		}
		c.done[last] += e.work
	}
	return c
}

// end is when the replayed run ends.
func (c *progressCurve) end() time.Duration { return c.at[len(c.at)-1] }

// when returns the first instant of the replay by which work was done
// (its end for work beyond the total): a sample's end, since the run too
// counts a sample's work when it ends. Samples that end together in the
// replay are all done at that instant, so the first of four taken at once
// puts the run where the replay had ended all four.
func (c *progressCurve) when(work time.Duration) time.Duration {
	i, _ := slices.BinarySearch(c.done, work)
	if i == len(c.done) {
		return c.end()
	}
	return c.at[i]
}

// etaCurve estimates the time a parallel run still needs: the replay's
// time left from where it had done as much work as the run has (done,
// the serial estimate of the samples taken), scaled by how long the run
// took to get there (elapsed) against the replay, that ratio clamped to
// [etaMinRatio, etaMaxRatio]. Before any sample finished it is the whole
// replay.
func etaCurve(elapsed, done time.Duration, c *progressCurve) time.Duration {
	at := c.when(done)
	left := c.end() - at
	if left <= 0 {
		return 0
	}
	if at <= 0 || elapsed <= 0 {
		return left
	}
	r := min(max(float64(elapsed)/float64(at), etaMinRatio), etaMaxRatio)
	return time.Duration(float64(left) * r)
}

// etaMean estimates the remaining time from the mean time per sample so
// far: the fallback when the plan's samples have no estimate.
func etaMean(elapsed time.Duration, doneThisRun, remaining int) time.Duration {
	if doneThisRun == 0 {
		return 0
	}
	return elapsed / time.Duration(doneThisRun) * time.Duration(remaining)
}

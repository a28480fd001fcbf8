package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// The admission rule of parallel runs (quicbench run --parallel N, see
// docs/plan-format.md, "Parallel testbeds") keeps the machine's predicted
// load inside a budget, so that samples taken beside others measure the
// link and not a machine short of CPU. Each sample's load is predicted
// from its cell (CellLoad) and refined from what the cell's earlier
// samples measured (the runner's part); the constants follow.
const (
	// RefCores is the number of CPUs of the reference machine, on which
	// estCapTCP and estCapQUIC were measured: a connection at the cap keeps
	// all of them busy (client, server, emulator and the kernel between).
	RefCores = 2

	// LoadBudgetShare is the share of the machine's CPUs that the samples
	// running at once may be predicted to use. The rest is headroom for
	// what the prediction misses (bursts, the kernel's own work) and for
	// the emulator's real-time threads, whose wake-up latency is the delay
	// error: docs/performance.md, "Parallel testbeds".
	LoadBudgetShare = 0.5

	// MaxParallelPerCPU caps the testbeds a parallel run keeps active per
	// CPU, whatever their predicted load: a safety bound, not the rule.
	// How many blocks run at once is the admission rule's to decide from
	// their predicted CPU (the budget) and the memory they hold
	// (MemoryLimits); the cap bounds what was measured with testbeds
	// carrying the load the rule admits (64 on the 2-CPU reference
	// machine, quicbench calibrate --parallel 1,64 --admitted: the delay
	// error's p50 within its target; its p99 at the machine's idle level
	// up to 32 testbeds, above the target at 64, where the samples say so:
	// docs/performance.md, "Parallel testbeds at the admitted load"), and
	// what one process holds: 2 SCHED_FIFO forwarding threads and about
	// 30 file descriptors per testbed ("Parallel testbeds: memory, files
	// and threads").
	MaxParallelPerCPU = 32

	// unlimitedRTT is the round trip below which a link without a rate
	// limit leaves a sample's timing to the machine (CellLoad).
	unlimitedRTT = time.Millisecond

	// MaxParallelSetting is the largest parallel a plan or the command line
	// may ask for; MaxParallel caps what a machine runs.
	MaxParallelSetting = 1024
)

// SampleLoad is the machine share a sample of a cell is predicted to take while
// it runs.
type SampleLoad struct {
	// CPU is the predicted CPU use in CPUs (1 = one CPU busy for the
	// sample's duration): client, server, emulator and kernel together.
	CPU float64
	// Exclusive samples run alone: no other testbed is active while they
	// run. Reason says why (empty otherwise).
	Exclusive bool
	Reason    string
	// Browser: the sample runs in a browser (chromium, firefox,
	// lighthouse), whose memory the admission rule counts
	// (Admission.Browsers).
	Browser bool
}

// endpointCPU is what a sample costs the client and server processes
// together, per transport: a fixed part, each request, each megabyte moved
// and each second the sample's connections are open (timers,
// acknowledgements, pacing: quic-go's cost three times TCP's). The fixed,
// per-request and per-megabyte parts were fitted (least squares) over the
// 720 samples of a serial run of the parallel-check plan: pages of 5 or 50
// objects of 4 or 128 KB over 2 and 10 Mbit/s, RTT 18 ms, loss 0 and 2%
// (docs/performance.md, "Parallel testbeds"). In those samples the
// seconds and the megabytes went together; the per-second part is the
// intercept of bulk downloads' CPU per second against their goodput over
// 1-10 Mbit/s links and loss-limited 100 ms ones (0.03-1.2 MB/s, quicbench
// calibrate --parallel 11 --admitted, one transport at a time), whose
// slopes (QUIC 65, TCP 16 ms per MB) agree with the page fit's per-MB
// parts. The page fit's per-second parts, 23 and 6.4 ms, predicted slow
// long transfers 2-4 times the CPU they took.
type endpointCPU struct {
	fixed, perRequest, perMB, perSecond time.Duration
}

var (
	endpointCPUTCP  = endpointCPU{fixed: 5900 * time.Microsecond, perRequest: 400 * time.Microsecond, perMB: 19 * time.Millisecond, perSecond: 3 * time.Millisecond}
	endpointCPUQUIC = endpointCPU{fixed: 4200 * time.Microsecond, perRequest: 350 * time.Microsecond, perMB: 66 * time.Millisecond, perSecond: 8 * time.Millisecond}
)

// EndpointLoadFactor converts the CPU the endpoints' processes use into the
// machine load the admission rule budgets: the emulator's forwarding and
// the receiving stacks' work inside its TUN writes are charged to the
// runner, not to the endpoints (about half the endpoints' own at
// link-bound rates, docs/performance.md, "Emulator CPU").
const EndpointLoadFactor = 1.5

// MeasuredLoad is the load a sample of a client's cell measured: its
// client's and server's CPU time over the time it held its testbed (its
// measured part and overhead), in CPUs, as CellLoad predicts it. For the
// built-in client (and the others but browsers) the endpoints' CPU times
// EndpointLoadFactor. A browser's processes do far more than move bytes
// (rendering, script, their own start or context), so the emulator's and
// the kernel's share is counted from the server's CPU alone, which does
// the sample's network work: as much again as the built-in client's
// would (client and server alike), times EndpointLoadFactor - 1. A
// non-positive held time gives 0.
func MeasuredLoad(client string, clientCPU, serverCPU, held time.Duration) float64 {
	if held <= 0 {
		return 0
	}
	if _, browser := browserCostOf(client); browser {
		return (float64(clientCPU) + (2*EndpointLoadFactor-1)*float64(serverCPU)) / float64(held)
	}
	return EndpointLoadFactor * float64(clientCPU+serverCPU) / float64(held)
}

// CellLoad predicts the load of one sample of cell c (a cell of this plan
// or one stored by a run of it) from its duration estimate: the CPU its
// endpoints need for its connections, requests and bytes and for the
// seconds its connections stay open (endpointCPU), times
// EndpointLoadFactor, over the sample's estimated duration; or, when
// more, the share of that duration the sample's bytes would keep the
// reference machine busy at its cap on an unlimited link (estCapTCP,
// estCapQUIC; times RefCores): a transfer at the cap counts as the whole
// machine. A page over 2 Mbit/s costs 0.02-0.1 CPU, 10 MB at 100 Mbit/s
// over QUIC most of the budget.
//
// A browser client's sample (chromium, firefox) costs in CPU what its
// browser does around the sample (browserCost.sampleCPU: its start and
// teardown, or a context's), each page it loads (the page test's, or
// the bench page in which the other tests run: pageCPU) and the network
// work of its connections, requests and bytes, over the sample's
// estimated duration (its stack's client.cost, read by browsers.go).
//
// A cell runs alone (Exclusive) when it would use the machine whatever its
// link (the cpu test; a client whose stack says so, client.exclusive in
// peers/NAME/stack.yaml: the lighthouse client, whose audit measures the
// page's CPU, the aioquic client, Python and CPU-bound; the fairness test,
// whose bulk flows fill the bottleneck beside competing flows), when its link
// neither limits the rate nor adds a millisecond of round trip (the sample
// then measures the machine: a millisecond's work, which the scheduling
// of other testbeds would disturb), or when its prediction alone fills the
// budget of a reference machine (a transfer at Gbit/s).
func CellLoad(c *model.Cell) (SampleLoad, error) {
	switch {
	case c.Test == TestCPU:
		return SampleLoad{CPU: RefCores, Exclusive: true, Reason: "the cpu test measures CPU cost"}, nil
	case clientExclusive(c.Client) != "":
		// The lighthouse audit measures the page's CPU; a client in Python
		// (aioquic: about 20-30 MB per CPU-second,
		// ../shared/research/peers.md) would make the quic-go cost model
		// below underestimate it.
		_, browser := browserCostOf(c.Client)
		return SampleLoad{CPU: RefCores, Exclusive: true, Browser: browser, Reason: clientExclusive(c.Client)}, nil
	case c.Test == TestFairness:
		// Its flows fill the bottleneck for the test's duration, beside
		// competing flows whose processes' CPU no sample measures.
		return SampleLoad{CPU: RefCores, Exclusive: true, Reason: "the fairness test fills its bottleneck with bulk flows"}, nil
	}
	bc, inBrowser := browserCostOf(c.Client)
	if inBrowser && browserTimedExchanges(c.Test) {
		// Measured with a browser on 8 testbeds (docs/performance.md,
		// "Browsers on parallel testbeds"): every Chromium latency cell
		// took 40-60% longer than alone, while link-bound downloads moved
		// 1-4%.
		return SampleLoad{CPU: RefCores, Exclusive: true, Browser: true,
			Reason: "a browser times its short exchanges (" + c.Test + ") with the page's script, whose event loop waits for a CPU beside other testbeds"}, nil
	}
	var rtt time.Duration
	limited := false
	for _, s := range []string{c.LinkUp, c.LinkDown} {
		l, err := spec.Parse(s)
		if err != nil {
			return SampleLoad{}, fmt.Errorf("cell %s: link %q: %w", c.Key, s, err)
		}
		rtt += l.Delay
		limited = limited || l.RateBps() > 0 || l.Trace != ""
	}
	prm, err := StoredCellParams(c)
	if err != nil {
		return SampleLoad{}, err
	}
	onLink, work, err := estimateParams(c, prm, 0)
	if err != nil {
		return SampleLoad{}, err
	}
	onLink = max(onLink, time.Microsecond)
	st, _ := stackOf(c.Protocol)
	k := endpointCPUTCP
	if st.quic {
		k = endpointCPUQUIC
	}
	net := func(k endpointCPU) time.Duration {
		return k.fixed + time.Duration(work.requests)*k.perRequest +
			time.Duration(float64(k.perMB)*float64(work.bytes)/1e6) +
			time.Duration(float64(k.perSecond)*onLink.Seconds())
	}
	var endpoints float64
	if inBrowser {
		b := bc.tcp
		if st.quic {
			b = bc.quic
		}
		// The server's half of the built-in client's cost.
		srv := endpointCPU{fixed: k.fixed / 2, perRequest: k.perRequest / 2, perMB: k.perMB / 2, perSecond: k.perSecond / 2}
		browser := bc.sampleCPU + time.Duration(work.pages)*bc.pageCPU + net(b)
		endpoints = MeasuredLoad(c.Client, browser, net(srv), onLink)
	} else {
		endpoints = MeasuredLoad(c.Client, net(k), 0, onLink)
	}
	machine := RefCores * float64(work.bytes) * 8 / st.capBps / onLink.Seconds()
	ld := SampleLoad{CPU: min(RefCores, max(endpoints, machine)), Browser: inBrowser}
	switch {
	case !limited && rtt < unlimitedRTT:
		ld.Exclusive = true
		ld.Reason = fmt.Sprintf("its link has no rate limit and adds %v of round trip: the sample measures the machine", rtt)
	case ld.CPU > LoadBudget(RefCores):
		ld.Exclusive = true
		ld.Reason = fmt.Sprintf("it is predicted to keep %.2f CPUs busy", ld.CPU)
	}
	return ld, nil
}

// clientExclusive is why a client's samples run alone (its stack's
// Exclusive), "" when they need not.
func clientExclusive(client string) string {
	if st, ok := peers.ClientStack(client); ok && st.Client != nil {
		return st.Client.Exclusive
	}
	return ""
}

// LoadBudget is the predicted CPU use that the samples running at once may
// add up to on a machine of cpus CPUs.
func LoadBudget(cpus int) float64 { return LoadBudgetShare * float64(max(cpus, 1)) }

// MaxParallel is the most testbeds a parallel run keeps active on a
// machine of cpus CPUs.
func MaxParallel(cpus int) int { return MaxParallelPerCPU * max(cpus, 1) }

// Admission is the rule that decides whether a block of samples may start
// on a free testbed beside the blocks running on the others: at most Slots
// blocks at once, an exclusive block only when nothing else runs (and
// nothing else beside it), at most Browsers blocks in a browser at once
// (when Browsers > 0), and the predicted CPU of the running blocks plus
// the new one within Budget. A block may always start on an idle machine.
type Admission struct {
	Slots  int     // testbeds active at once (the run's --parallel, capped by MaxParallel)
	Budget float64 // LoadBudget of the machine
	// Browsers is the most blocks with a browser (SampleLoad.Browser)
	// running at once, from the memory the machine has for them
	// (MemoryLimits); 0: no limit.
	Browsers int
}

// Admit reports whether a block of load next may start while blocks of
// the loads running are active.
func (a Admission) Admit(running []SampleLoad, next SampleLoad) bool {
	if len(running) == 0 {
		return true
	}
	if next.Exclusive || len(running) >= a.Slots {
		return false
	}
	sum, browsers := next.CPU, 0
	for _, l := range running {
		if l.Exclusive {
			return false
		}
		sum += l.CPU
		if l.Browser {
			browsers++
		}
	}
	if next.Browser && a.Browsers > 0 && browsers >= a.Browsers {
		return false
	}
	return sum <= a.Budget
}

// Block is what the parallel order needs to know of one block of a
// schedule: the samples of one iteration of one cell group, taken one
// after the other on one testbed.
type Block struct {
	Exclusive bool          // any of its cells' SampleLoad.Exclusive
	Duration  time.Duration // estimated time of its samples (0 when unknown)
}

// ParallelOrder returns the order in which a parallel run starts the
// blocks of a schedule (indexes into blocks): the exclusive blocks first,
// in schedule order, which run one at a time, then the others longest
// first (ties in schedule order), so that the run does not end on a long
// block started last while the other testbeds idle. Iterations of one
// group keep their order: they have equal estimates.
func ParallelOrder(blocks []Block) []int {
	idx := make([]int, len(blocks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		x, y := blocks[a], blocks[b]
		switch {
		case x.Exclusive != y.Exclusive:
			if x.Exclusive {
				return -1
			}
			return 1
		case x.Exclusive:
			return 0
		}
		return cmp.Compare(y.Duration, x.Duration)
	})
	return idx
}

// browserTimedExchanges reports whether a browser's samples of test are
// sequences of short exchanges timed by the bench page's script (a few
// milliseconds each), which CPU contention lengthens by more than the
// link's variation: such cells run alone.
func browserTimedExchanges(test string) bool {
	return test == TestLatency || test == TestTTFB || test == TestHandshake
}

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
	// CPU, whatever their predicted load: beyond it the emulator's delay
	// error leaves its targets (p99 <= 150 µs) on the reference machine
	// (docs/performance.md, "Parallel testbeds: delay precision").
	MaxParallelPerCPU = 8

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
}

// endpointCPU is what a sample costs the client and server processes
// together, fitted (least squares over the 720 samples of a serial run of
// the parallel-check plan: pages of 5 or 50 objects of 4 or 128 KB over 2
// and 10 Mbit/s, RTT 18 ms, loss 0 and 2%; docs/performance.md, "Parallel
// testbeds") per transport: a fixed part, each request, each megabyte
// moved and each second the sample's connections are open (timers,
// acknowledgements, pacing: quic-go's cost four times TCP's).
type endpointCPU struct {
	fixed, perRequest, perMB, perSecond time.Duration
}

var (
	endpointCPUTCP  = endpointCPU{fixed: 5900 * time.Microsecond, perRequest: 400 * time.Microsecond, perMB: 19 * time.Millisecond, perSecond: 6400 * time.Microsecond}
	endpointCPUQUIC = endpointCPU{fixed: 4200 * time.Microsecond, perRequest: 350 * time.Microsecond, perMB: 66 * time.Millisecond, perSecond: 23 * time.Millisecond}
)

// EndpointLoadFactor converts the CPU the endpoints' processes use into the
// machine load the admission rule budgets: the emulator's forwarding and
// the receiving stacks' work inside its TUN writes are charged to the
// runner, not to the endpoints (about half the endpoints' own at
// link-bound rates, docs/performance.md, "Emulator CPU").
const EndpointLoadFactor = 1.5

// CellLoad predicts the load of one sample of cell c (a cell of this plan
// or one stored by a run of it) from its duration estimate: the CPU its
// endpoints need for its connections, requests and bytes and for the
// seconds its connections stay open (endpointCPU), times
// EndpointLoadFactor, over the sample's estimated duration; or, when
// more, the share of that duration the sample would keep the reference
// machine busy on an unlimited link (its estimate with no link spec, the
// runner's overhead left out, times RefCores): a transfer at the machine's
// cap counts as the whole machine. A page over 2 Mbit/s costs 0.02-0.1
// CPU, 10 MB at 100 Mbit/s over QUIC most of the budget.
//
// A cell runs alone (Exclusive) when it would use the machine whatever its
// link (the cpu test; the chromium and lighthouse clients, whose browser
// and renderer processes are CPU-bound during a load), when its link
// neither limits the rate nor adds a millisecond of round trip (the sample
// then measures the machine: a millisecond's work, which the scheduling
// of other testbeds would disturb), or when its prediction alone fills the
// budget of a reference machine (a transfer at Gbit/s).
func CellLoad(c *model.Cell) (SampleLoad, error) {
	switch {
	case c.Test == TestCPU:
		return SampleLoad{CPU: RefCores, Exclusive: true, Reason: "the cpu test measures CPU cost"}, nil
	case clientExclusive(c.Client) != "":
		// a browser's processes, a client in Python (aioquic: about
		// 20-30 MB per CPU-second, ../shared/research/peers.md): the
		// quic-go cost model below would underestimate them
		return SampleLoad{CPU: RefCores, Exclusive: true, Reason: clientExclusive(c.Client)}, nil
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
	bare := *c
	bare.LinkUp, bare.LinkDown = "", ""
	atCap, _, err := estimateParams(&bare, prm, 0)
	if err != nil {
		return SampleLoad{}, err
	}
	onLink = max(onLink, time.Microsecond)
	k := endpointCPUTCP
	if st, _ := stackOf(c.Protocol); st.quic {
		k = endpointCPUQUIC
	}
	cpu := k.fixed + time.Duration(work.requests)*k.perRequest +
		time.Duration(float64(k.perMB)*float64(work.bytes)/1e6) +
		time.Duration(float64(k.perSecond)*onLink.Seconds())
	endpoints := EndpointLoadFactor * float64(cpu) / float64(onLink)
	busy := max(atCap-estRunnerOverhead, 0)
	machine := RefCores * float64(busy) / float64(onLink)
	ld := SampleLoad{CPU: min(RefCores, max(endpoints, machine))}
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
// nothing else beside it), and the predicted CPU of the running blocks
// plus the new one within Budget. A block may always start on an idle
// machine.
type Admission struct {
	Slots  int     // testbeds active at once (the run's --parallel, capped by MaxParallel)
	Budget float64 // LoadBudget of the machine
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
	sum := next.CPU
	for _, l := range running {
		if l.Exclusive {
			return false
		}
		sum += l.CPU
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

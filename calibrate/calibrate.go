package calibrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/emu/trace"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// Config describes a calibration.
type Config struct {
	// Up (client->server) and Down (server->client) are the links to
	// calibrate, as netns.Config takes them.
	Up, Down spec.Link
	// Seed of the link's random decisions (netns.Config.Seed).
	Seed uint64
	// CC is the TCP congestion control (default cubic).
	CC string
	// Packets is the number of probes per direction in each of the idle
	// and loaded phases (default 20,000; at least 100).
	Packets int
	// Duration of the rate phase per direction and of each throughput
	// transfer (default 3 s; 100 ms to 10 min).
	Duration time.Duration
	// Throughput adds the goodput comparison with a veth pair and the
	// emulator's CPU cost.
	Throughput bool
	// Exe is the executable that runs the throughput phase's endpoints,
	// each in a process of its own inside its namespace: started as
	// `Exe calibrate-bulk server|client` (BulkCommand), it must dispatch
	// to BulkMain, as quicbench does. Default: os.Executable().
	Exe string
	// Progress, if set, receives one line per phase.
	Progress io.Writer
}

// Defaults and limits of Config.
const (
	DefaultPackets  = 20000
	DefaultDuration = 3 * time.Second
	MinPackets      = 100
	MaxPackets      = 10_000_000
	MinDuration     = 100 * time.Millisecond
	MaxDuration     = 10 * time.Minute
)

// Targets of the calibration, from the link emulator's specification.
const (
	TolDelayP50   = 50 * time.Microsecond
	TolDelayP99   = 150 * time.Microsecond
	TolJitter     = 50 * time.Microsecond
	TolRate       = 0.02 // relative
	TolReorderAbs = 0.001
	TolReorderRel = 0.10
)

// Traffic shapes.
const (
	probeRate     = 10000 // probes per second and direction, at most
	probeShare    = 0.2   // of a configured rate, at most
	loadBps       = 100e6 // bit/s of load in the loaded phase, at most
	floorProbes   = 5000
	rateOverdrive = 1.1
)

// Figure is one measured property of the link next to its configured value.
type Figure struct {
	// Direction is "up" (client->server), "down", or "" for figures of the
	// measurement itself (floor).
	Direction string `json:"direction"`
	Name      string `json:"name"`
	// Unit of Configured, Measured, Low and High: "ms", "us", "%",
	// "Mbit/s" or "packets".
	Unit string `json:"unit"`
	// Configured is what the link spec prescribes; nil when nothing does.
	Configured *float64 `json:"configured,omitempty"`
	Measured   float64  `json:"measured"`
	// Low and High bound Measured's 95% confidence interval (proportions).
	Low  *float64 `json:"low,omitempty"`
	High *float64 `json:"high,omitempty"`
	// Tolerance states the rule Status was decided by.
	Tolerance string `json:"tolerance"`
	// Status is "ok", "FAIL", or "info" (shown, not judged).
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Figure statuses.
const (
	StatusOK   = "ok"
	StatusFail = "FAIL"
	StatusInfo = "info"
)

// Goodput compares one protocol's bulk goodput through the emulated link
// with the same over the veth pair.
type Goodput struct {
	Proto       string  `json:"proto"` // "tcp", "tls" or "quic"
	EmulatedBps float64 `json:"emulated_bps"`
	VethBps     float64 `json:"veth_bps"`
	Ratio       float64 `json:"ratio"` // emulated / veth
	// QUIC only: datagrams the client's namespace dropped for want of
	// socket buffer space (a receiver that cannot keep up), which quic-go's
	// sender takes for congestion.
	VethReceiveDrops     uint64 `json:"veth_receive_drops,omitempty"`
	EmulatedReceiveDrops uint64 `json:"emulated_receive_drops,omitempty"`
	Error                string `json:"error,omitempty"`
}

// CPU is the emulator's CPU use while it carries a fixed load, next to the
// machine's CPU for the same load over the veth pair (the baseline),
// measured in the same run.
type CPU struct {
	Load       string  `json:"load"`        // what was carried
	GoodputBps float64 `json:"goodput_bps"` // what arrived
	// CorePercent is the forwarding threads' CPU time / wall time, in % of
	// one core. It includes the work the kernel does inside their system
	// calls for the endpoints: a TUN write runs the receiving namespace's IP
	// and transport stack and wakes its reader, and the transmissions that
	// the delivered packet triggers (an ACK, new data behind it), as a veth
	// transmission does in the sender's system call.
	CorePercent float64 `json:"core_percent"`
	// MachinePercent is the CPU, in % of one core, that carrying the load
	// took from a competing workload: a soaker thread per CPU under
	// SCHED_IDLE counts units of arithmetic, and what it lost against its
	// rate on the quiet machine (measured in the same run, before and
	// after) is what everything else used: endpoints, emulator, kernel,
	// interrupts and softirqs wherever they ran, and the hypervisor's work
	// for the machine (soak.go).
	MachinePercent float64 `json:"machine_percent"`
	// Baseline says how the same load crossed the veth pair: "veth", or
	// "veth, tbf rate 100mbit each way" where the emulator enforces a rate
	// (the kernel's own shaper then does the same job); "" when nothing
	// here does what the emulated link does (delay, loss: no netem), and
	// the Veth and Net figures are then 0.
	// VethMachinePercent is the CPU it took there, measured the same way,
	// and VethGoodputBps what arrived.
	Baseline           string  `json:"baseline"`
	VethMachinePercent float64 `json:"veth_machine_percent"`
	VethGoodputBps     float64 `json:"veth_goodput_bps"`
	// NetPercent is what the emulated path took beyond carrying the same
	// load over the baseline: MachinePercent minus VethMachinePercent
	// scaled to GoodputBps. It is the emulator's own cost, without the
	// endpoints' stacks that CorePercent includes.
	NetPercent float64 `json:"net_percent"`
	// SyscallsPerPacket counts the forwarding threads' system calls (reads,
	// reads that found nothing, writes, returns from ppoll) per wire packet
	// delivered, both directions together; WakeupsPerPacket the returns
	// from ppoll alone. Unlike CPU time, neither depends on how busy the
	// machine was.
	SyscallsPerPacket float64 `json:"syscalls_per_packet"`
	WakeupsPerPacket  float64 `json:"wakeups_per_packet"`
	Error             string  `json:"error,omitempty"`
}

// Report is the outcome of a calibration.
type Report struct {
	Up       string `json:"up"`
	Down     string `json:"down"`
	Seed     uint64 `json:"seed"`
	CC       string `json:"cc"`
	Packets  int    `json:"packets"`
	Duration string `json:"duration"`
	// Offload and Realtime describe the emulator: TSO/USO on the TUN
	// devices, SCHED_FIFO forwarding threads.
	Realtime bool `json:"realtime"`
	// Timestamping describes how one-way delays were measured.
	Timestamping string    `json:"timestamping"`
	Figures      []Figure  `json:"figures"`
	Goodput      []Goodput `json:"goodput,omitempty"`
	CPU          []CPU     `json:"cpu,omitempty"`
	Warnings     []string  `json:"warnings,omitempty"`
	// Parallel holds RunParallel's results, one per number of testbeds.
	Parallel []ParallelResult `json:"parallel,omitempty"`
	// Admitted holds RunAdmitted's results, one per number of testbeds.
	Admitted []AdmittedResult `json:"admitted,omitempty"`
	OK       bool             `json:"ok"` // no judged figure failed
}

// Failed returns the judged figures outside their tolerance.
func (r *Report) Failed() []Figure {
	var out []Figure
	for _, f := range r.Figures {
		if f.Status == StatusFail {
			out = append(out, f)
		}
	}
	return out
}

const timestampingMethod = "send: CLOCK_MONOTONIC read just before send(2) on a locked thread; " +
	"receive: kernel timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME converted to CLOCK_MONOTONIC) when the packet enters the receiver's stack; " +
	"error floor: the same probes over a plain veth pair (figures \"floor\")"

// directions
const (
	dirUp   = 0
	dirDown = 1
)

var dirNames = [2]string{"up", "down"}

// downSeed is the seed netns gives the down pipeline (see netns.Config.Seed).
func dirSeed(seed uint64, dir int) uint64 {
	if dir == dirDown {
		return seed ^ 0x9e3779b97f4a7c15
	}
	return seed
}

func (c *Config) normalize() error {
	if c.Packets == 0 {
		c.Packets = DefaultPackets
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.CC == "" {
		c.CC = model.DefaultCC
	}
	if c.Packets < MinPackets || c.Packets > MaxPackets {
		return fmt.Errorf("calibrate: %d probes: want %d to %d", c.Packets, MinPackets, MaxPackets)
	}
	if c.Duration < MinDuration || c.Duration > MaxDuration {
		return fmt.Errorf("calibrate: duration %v: want %v to %v", c.Duration, MinDuration, MaxDuration)
	}
	if err := c.Up.Validate(); err != nil {
		return fmt.Errorf("calibrate: up link: %w", err)
	}
	if err := c.Down.Validate(); err != nil {
		return fmt.Errorf("calibrate: down link: %w", err)
	}
	return nil
}

// run is one calibration in progress.
type run struct {
	ctx   context.Context
	cfg   Config
	links [2]spec.Link
	tb    *netns.Testbed
	veth  *vethPair
	rep   *Report
	phase byte

	rx      [2]*receiver // per direction: up's in the server namespace
	probeTx [2]*sender
	bulkTx  [2]*sender
	vrx     *receiver
	vtx     *sender

	// timer is the machine's timer baseline: a thread sleeping like the
	// forwarding threads, whose lateness is measured in each probe phase.
	timer *forward.TimerProbe

	// soak is the soaker of the CPU figures, started by the first.
	soak *soaker

	// maxPPS, when set, caps the probe rate of each direction
	// (RunAdmitted's probe testbed, which stands for a sample).
	maxPPS float64

	closers []io.Closer

	// samples are the probe phases' samples, in the order analyzed.
	samples []keptSample
}

// keptSample is one direction's probe sample of one phase.
type keptSample struct {
	dir  int
	idle bool
	s    *probeSample
}

// timerProbePeriod is the sleep of the machine's timer baseline thread: a
// thousand wake-ups per second, about 1% of a core.
const timerProbePeriod = time.Millisecond

// Run builds a testbed with cfg's links, calibrates it and removes it. An
// error means the calibration could not be carried out (bad Config, no
// privileges, a failing system call); figures outside their tolerance are
// not errors: see Report.Failed. An invalid Config returns an error before
// anything is created.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	r, err := newRun(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	steps := []func() error{r.floor, func() error { return r.probes(false) }, func() error { return r.probes(true) }, r.rates}
	if r.cfg.Throughput {
		steps = append(steps, r.throughput)
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.rep.OK = len(r.rep.Failed()) == 0
	return r.rep, nil
}

// newRun validates cfg, then builds the testbed, the veth pair and the
// calibration sockets. The caller closes the run.
func newRun(ctx context.Context, cfg Config) (*run, error) {
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	return newRunWith(ctx, cfg, runOptions{name: "cal" + hex.EncodeToString(id), veth: true, timer: true})
}

// runOptions say what newRunWith builds besides the testbed.
type runOptions struct {
	name  string // the testbed's
	veth  bool   // the veth pair of the floor (and its sockets)
	timer bool   // the machine's timer baseline thread
}

// newRunWith is newRun with a given testbed name and, optionally, without
// the veth pair or the timer baseline (RunParallel builds them once, not
// per testbed).
func newRunWith(ctx context.Context, cfg Config, o runOptions) (*run, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	tb, err := netns.New(ctx, netns.Config{Name: o.name, Up: cfg.Up, Down: cfg.Down, Seed: cfg.Seed, CC: cfg.CC})
	if err != nil {
		return nil, err
	}
	r := &run{ctx: ctx, cfg: cfg, links: [2]spec.Link{cfg.Up, cfg.Down}, tb: tb}
	r.rep = &Report{
		Up: cfg.Up.String(), Down: cfg.Down.String(), Seed: cfg.Seed, CC: cfg.CC,
		Packets: cfg.Packets, Duration: cfg.Duration.String(), Timestamping: timestampingMethod,
	}
	if hint := tb.RestrictedCCHint(); hint != "" {
		r.warn("%s", hint)
	}
	sys := tb.Sysctls()
	vsys := map[string]string{}
	for _, k := range []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_no_metrics_save"} {
		if v, ok := sys[k]; ok {
			vsys[k] = v
		}
	}
	if o.veth {
		if r.veth, err = newVethPair(vsys); err != nil {
			r.close()
			return nil, err
		}
	}
	if err := r.setup(); err != nil {
		r.close()
		return nil, err
	}
	if err := r.vethReady(); err != nil {
		r.close()
		return nil, err
	}
	up, _ := tb.ForwarderStats()
	r.rep.Realtime = up.Realtime
	if o.timer {
		if r.timer, err = forward.StartTimerProbe(emu.MonotonicClock(), timerProbePeriod, up.Realtime); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *run) close() {
	if r.timer != nil {
		r.timer.Stop()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		_ = r.closers[i].Close()
	}
	if r.veth != nil {
		_ = r.veth.Close()
	}
	_ = r.tb.Close()
}

func (r *run) progress(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "calibrate: "+format+"\n", a...)
	}
}

func (r *run) warn(format string, a ...any) {
	r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf(format, a...))
}

// setup opens the receivers and senders of both environments.
func (r *run) setup() error {
	var err error
	add := func(c io.Closer) { r.closers = append(r.closers, c) }
	sides := [2][2]netns.Side{{netns.Client, netns.Server}, {netns.Server, netns.Client}} // from, to
	for dir := range 2 {
		from, to := sides[dir][0], sides[dir][1]
		if r.rx[dir], err = newReceiver(r.tb, to); err != nil {
			return err
		}
		add(r.rx[dir])
		if r.probeTx[dir], err = newSender(r.tb, from, r.rx[dir].addr, false); err != nil {
			return err
		}
		add(r.probeTx[dir])
		if r.bulkTx[dir], err = newSender(r.tb, from, r.rx[dir].addr, true); err != nil {
			return err
		}
		add(r.bulkTx[dir])
	}
	if r.veth == nil {
		return nil
	}
	if r.vrx, err = newReceiver(r.veth, netns.Server); err != nil {
		return err
	}
	add(r.vrx)
	if r.vtx, err = newSender(r.veth, netns.Client, r.vrx.addr, false); err != nil {
		return err
	}
	add(r.vtx)
	return nil
}

// collectors runs one receiver per collector until the returned stop
// function is called; stop waits for them and returns their first error.
func collect(rxs []*receiver, cols []*collector) (stop func() error) {
	ch := make(chan struct{})
	errs := make([]error, len(rxs))
	var wg sync.WaitGroup
	for i := range rxs {
		wg.Go(func() { errs[i] = rxs[i].run(cols[i], ch) })
	}
	return func() error {
		close(ch)
		wg.Wait()
		return errors.Join(errs...)
	}
}

// runFlowsCtx runs flows, ending them early when ctx is cancelled.
func (r *run) runFlows(flows []*flow) {
	stop := context.AfterFunc(r.ctx, func() {
		for _, f := range flows {
			f.cancel.Store(true)
		}
	})
	defer stop()
	runFlows(flows)
}

func (r *run) nextPhase() byte {
	r.phase++
	return r.phase
}

// floor measures the one-way delay over the veth pair.
func (r *run) floor() error {
	n := min(r.cfg.Packets, floorProbes)
	r.progress("measurement floor: %d probes over a veth pair", n)
	fp := r.startFloor(n, time.Second/probeRate)
	r.runFlows([]*flow{fp.flow})
	time.Sleep(50 * time.Millisecond)
	d, err := fp.finish("floor")
	if err != nil {
		return err
	}
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50", d.p50}, {"p99", d.p99}, {"max", d.max}} {
		r.rep.Figures = append(r.rep.Figures, Figure{Name: "floor: one-way delay over veth " + q.name, Unit: "us",
			Measured: q.v / 1e3, Tolerance: "-", Status: StatusInfo, Note: "measurement error bound"})
	}
	return nil
}

// vethReady waits until a probe crosses the veth pair. A new pair drops
// packets until the kernel has noted its carrier and activated its queue,
// which its link watcher may defer by up to a second: a floor measured
// before then would count its first probes lost, or, when it is short, see
// none arrive.
func (r *run) vethReady() error {
	if r.veth == nil {
		return nil
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		ph := r.nextPhase()
		col := newCollector(ph, 1, realtimeOffset())
		stop := collect([]*receiver{r.vrx}, []*collector{col})
		var recs []sendRec
		r.runFlows([]*flow{newProbeFlow(r.vtx, ph, 1, time.Millisecond, &recs)})
		time.Sleep(5 * time.Millisecond)
		if err := stop(); err != nil {
			return fmt.Errorf("veth receiver: %w", err)
		}
		if col.probes[0].copies > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("veth pair: no probe crossed it within 3 s")
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
	}
}

// floorPhase is a probe flow over the veth pair in progress: its receiver
// runs from startFloor until finish; the caller runs flow.
type floorPhase struct {
	r    *run
	flow *flow
	col  *collector
	recs []sendRec
	n    int
	off0 int64
	stop func() error
}

// startFloor prepares n probes over the veth pair, interval apart, and
// starts their receiver.
func (r *run) startFloor(n int, interval time.Duration) *floorPhase {
	ph := r.nextPhase()
	fp := &floorPhase{r: r, n: n, off0: realtimeOffset()}
	fp.col = newCollector(ph, n, fp.off0)
	fp.stop = collect([]*receiver{r.vrx}, []*collector{fp.col})
	fp.flow = newProbeFlow(r.vtx, ph, n, interval, &fp.recs)
	return fp
}

// finish stops the receiver and summarizes the one-way delays (ns) of the
// probes that arrived, warning (as phase) about those that did not.
func (fp *floorPhase) finish(phase string) (dist, error) {
	r := fp.r
	if err := fp.stop(); err != nil {
		return dist{}, fmt.Errorf("veth receiver: %w", err)
	}
	r.checkClock(phase, fp.off0)
	sendT := sendTimes(fp.recs, fp.n)
	var owd []float64
	for seq, p := range fp.col.probes {
		if p.copies > 0 && sendT[seq] != 0 {
			owd = append(owd, float64(p.rx-sendT[seq]))
		}
	}
	if len(owd) == 0 {
		return dist{}, errors.New("no probe crossed the veth pair")
	}
	if lost := len(fp.recs) - len(owd); lost > 0 {
		r.warn("%s: %d of %d probes over the veth pair did not arrive (socket overflow %d)", phase, lost, len(fp.recs), r.vrx.ovfl)
	}
	return summarize(owd), nil
}

// checkClock warns when CLOCK_REALTIME was stepped during a phase.
func (r *run) checkClock(phase string, off0 int64) {
	if d := realtimeOffset() - off0; d > 20e3 || d < -20e3 {
		r.warn("%s: the system clock was stepped by %v during the phase: its one-way delays are off by that much", phase, time.Duration(d))
	}
}

// sendTimes maps probe sequence numbers to send times (0: not sent).
func sendTimes(recs []sendRec, n int) []int64 {
	t := make([]int64, n)
	for _, rec := range recs {
		if rec.probe >= 0 && int(rec.probe) < n {
			t[rec.probe] = rec.t
		}
	}
	return t
}

// probeRatePPS is the probe rate of a direction: 10,000/s, or less so that
// probes use at most 20% of the link's rate.
func probeRatePPS(l spec.Link) float64 {
	pps := float64(probeRate)
	if bps := linkBps(l); bps > 0 {
		pps = min(pps, probeShare*bps/float64((probePayload+ipUDPOverhead)*8))
	}
	return max(pps, 10)
}

// linkBps is a link's capacity in bit/s: its rate, a trace's mean, or 0.
func linkBps(l spec.Link) float64 {
	if l.Rate > 0 {
		return float64(l.Rate)
	}
	if l.Trace != "" {
		if t, err := trace.Load(l.Trace); err == nil {
			return float64(t.MeanBps())
		}
	}
	return 0
}

// loadRate is the loaded phase's load in bit/s of IP bytes.
func loadRate(l spec.Link) float64 {
	if bps := linkBps(l); bps > 0 {
		return min(loadBps, bps/2)
	}
	return loadBps
}

// held is the number of packets a pipeline still holds.
func held(c emu.Counters) int64 {
	return int64(c.PacketsIn+c.Duplicated) - int64(c.PacketsOut+c.DropLoss+c.DropQueue+c.DropOff+c.DropMTU+c.DropFlush)
}

// waitIdle waits until both pipelines hold no packet (or limit passes).
func (r *run) waitIdle(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		up, down := r.tb.Counters()
		if held(up) <= 0 && held(down) <= 0 {
			return true
		}
		if time.Now().After(deadline) || r.ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drainLimit bounds how long a link may take to deliver what it holds.
func drainLimit(l spec.Link) time.Duration {
	d := l.MaxDelay() + l.Off + 2*time.Second
	if bps := linkBps(l); bps > 0 {
		pk, b := l.QueueLimit()
		q := float64(pk) * 1500
		if b > 0 && (pk == 0 || float64(b) < q) {
			q = float64(b)
		}
		d += time.Duration(q * 8 / bps * 1e9)
	}
	return d
}

// outside are the testbed's own losses, outside the pipelines: packets the
// kernel dropped at a TUN device, the pool could not hold, or a socket
// could not queue. A valid phase has none.
type outside struct {
	devUp, devDown uint64
	fwd            [2]forward.Stats
	ovfl           [2]uint32
	link           [2]emu.Counters // the pipelines' counters (LateOut)
}

func (r *run) outsideSnapshot() outside {
	var o outside
	o.devUp, o.devDown, _ = r.tb.DeviceDrops()
	o.fwd[0], o.fwd[1] = r.tb.ForwarderStats()
	o.link[0], o.link[1] = r.tb.Counters()
	o.ovfl = [2]uint32{r.rx[0].ovfl, r.rx[1].ovfl}
	return o
}

// checkOutside warns about losses outside the pipelines in directions dirs
// since before.
func (r *run) checkOutside(phase string, before outside, dirs ...int) {
	after := r.outsideSnapshot()
	dev := [2]uint64{after.devUp - before.devUp, after.devDown - before.devDown}
	for _, dir := range dirs {
		if dev[dir] > 0 {
			r.warn("%s, %s: the kernel dropped %d packets at the TUN device before the emulator read them", phase, dirNames[dir], dev[dir])
		}
		if n := after.fwd[dir].PoolEmpty - before.fwd[dir].PoolEmpty; n > 0 {
			r.warn("%s, %s: the emulator's packet pool was empty for %d packets", phase, dirNames[dir], n)
		}
		if n := after.ovfl[dir] - before.ovfl[dir]; n > 0 {
			r.warn("%s, %s: the receiving socket overflowed (%d datagrams dropped): loss figures include them", phase, dirNames[dir], n)
		}
	}
}

// probes runs the idle or loaded probe phase in both directions at once.
func (r *run) probes(loaded bool) error {
	p, err := r.startProbes(loaded)
	if err != nil {
		return err
	}
	r.timer.Take()
	phase0 := time.Now()
	cpu0, cpuErr0 := sysinfo.ReadCPUTimes()
	p.send()
	machine := r.timer.Take()
	phaseLen := time.Since(phase0)
	cpu1, cpuErr1 := sysinfo.ReadCPUTimes()
	stolen := time.Duration(-1)
	if cpuErr0 == nil && cpuErr1 == nil {
		stolen = sysinfo.StealBetween(cpu0, cpu1)
	}
	return p.finish(machine, phaseLen, stolen)
}

// probePhase is an idle or loaded probe phase of one testbed in progress:
// startProbes prepares it and starts its receivers, send runs its traffic
// until the link is idle again, finish turns it into figures. Several
// testbeds' phases can run at once (RunParallel): one send each,
// concurrently.
type probePhase struct {
	r       *run
	loaded  bool
	name    string
	flows   []*flow
	recs    [2][]sendRec
	cols    []*collector
	loads   [2]float64
	longest float64 // seconds the probes take
	off0    int64
	before  outside
	stop    func() error

	// Filled in by finish: the losses outside the pipelines after the
	// phase, its figures and its samples.
	after   outside
	figures []Figure
	samples []keptSample
}

// startProbes rebuilds the pipelines (same seed), prepares the phase's
// flows and starts its receivers.
func (r *run) startProbes(loaded bool) (*probePhase, error) {
	ph := r.nextPhase()
	if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
		return nil, err
	}
	p := &probePhase{r: r, loaded: loaded, name: "idle", cols: make([]*collector, 2), off0: realtimeOffset()}
	for dir := range 2 {
		pps := probeRatePPS(r.links[dir])
		if r.maxPPS > 0 {
			pps = min(pps, r.maxPPS)
		}
		p.longest = max(p.longest, float64(r.cfg.Packets)/pps)
		p.cols[dir] = newCollector(ph, r.cfg.Packets, p.off0)
		p.flows = append(p.flows, newProbeFlow(r.probeTx[dir], ph, r.cfg.Packets, time.Duration(1e9/pps), &p.recs[dir]))
	}
	if loaded {
		p.name = "load"
		for dir := range 2 {
			p.loads[dir] = loadRate(r.links[dir])
			p.flows = append(p.flows, newBulkFlow(r.bulkTx[dir], kindLoad, ph, p.loads[dir], time.Duration(p.longest*1e9), &p.recs[dir]))
		}
		// Probes and load leave from one loop, interleaved in time order,
		// so the model sees them in the order the link did: the bulk
		// flows share its thread.
	}
	r.progress("%s phase: %d probes per direction (%.1f s)%s", p.name, r.cfg.Packets, p.longest, map[bool]string{true: " with bulk UDP load", false: ""}[loaded])
	p.before = r.outsideSnapshot()
	p.stop = collect(r.rx[:], p.cols)
	return p, nil
}

// send runs the phase's traffic and waits until the link has delivered it.
func (p *probePhase) send() {
	r := p.r
	r.runFlows(p.flows)
	if !r.waitIdle(max(drainLimit(r.links[0]), drainLimit(r.links[1]))) && r.ctx.Err() == nil {
		r.warn("%s: the link still held packets when the phase ended", p.name)
	}
	time.Sleep(20 * time.Millisecond)
}

// finish stops the receivers and adds the phase's figures; machine,
// phaseLen and stolen are the machine's timer baseline over the phase
// (machineFigures; none when machine.Wakeups is 0).
func (p *probePhase) finish(machine forward.TimerStats, phaseLen, stolen time.Duration) error {
	r, name := p.r, p.name
	if err := p.stop(); err != nil {
		return fmt.Errorf("%s phase receiver: %w", name, err)
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.checkClock(name+" phase", p.off0)
	r.checkOutside(name+" phase", p.before, dirUp, dirDown)
	for _, f := range p.flows {
		if f.errs > 0 {
			r.warn("%s phase: %d packets could not be sent: %v", name, f.errs, f.lastErr)
		}
	}
	after := r.outsideSnapshot()
	p.after = after
	first, firstSample := len(r.rep.Figures), len(r.samples)
	for dir := range 2 {
		label := "idle"
		if p.loaded {
			label = fmt.Sprintf("under %s load", fmtBps(p.loads[dir]))
		}
		if err := r.analyzeProbes(dir, label, !p.loaded, p.cols[dir], p.recs[dir]); err != nil {
			return err
		}
		r.wakeFigures(dir, label, p.before.fwd[dir], after.fwd[dir])
	}
	phase := map[bool]string{false: "idle", true: "loaded"}[p.loaded]
	r.machineFigures(phase, machine, phaseLen, stolen, first)
	p.figures = slices.Clone(r.rep.Figures[first:])
	p.samples = slices.Clone(r.samples[firstSample:])
	return nil
}

// machineFigures reports the machine's own timer precision during a probe
// phase (the baseline thread's wake-up lateness, and the CPU time the
// hypervisor stole; stolen < 0: unknown), and marks the delay figures of
// the phase that failed while the machine itself woke threads later than
// the tolerance: on such a machine (a busy host's virtual machine) no
// emulator can meet it, and the note says so.
func (r *run) machineFigures(phase string, m forward.TimerStats, phaseLen, stolen time.Duration, first int) {
	if m.Wakeups == 0 {
		return
	}
	share := -1.0
	if phaseLen > 0 {
		share = 100 * float64(m.LateOver150SumNs) / float64(phaseLen)
	}
	held := ""
	if share >= 0 {
		held = fmt.Sprintf(" for %.2f%% of the phase", share)
	}
	var missed []string
	if m.Over150us > 0 {
		for i := first; i < len(r.rep.Figures); i++ {
			f := &r.rep.Figures[i]
			if f.Status != StatusFail || !isDelayFigure(f.Name) {
				continue
			}
			f.Note = strings.TrimSpace(f.Note + fmt.Sprintf(" (the machine itself held a sleeping thread back more than 150 us%s, up to %.0f us)", held, float64(m.LateMaxNs)/1e3))
			missed = append(missed, strings.TrimSpace(f.Direction+" "+f.Name))
		}
	}
	r.rep.Figures = append(r.rep.Figures,
		Figure{Name: "machine timer wake-up lateness mean " + phase, Unit: "us", Measured: float64(m.LateMean()) / 1e3,
			Tolerance: "-", Status: StatusInfo, Note: fmt.Sprintf("%d wake-ups of a baseline thread sleeping like the emulator's", m.Wakeups)},
		Figure{Name: "machine timer wake-up lateness max " + phase, Unit: "us", Measured: float64(m.LateMaxNs) / 1e3,
			Tolerance: "-", Status: StatusInfo, Note: fmt.Sprintf("%d wake-ups later than 150 us, %d later than 500 us", m.Over150us, m.Over500us)})
	if share >= 0 {
		r.rep.Figures = append(r.rep.Figures, Figure{Name: "machine time held back over 150 us " + phase, Unit: "%",
			Measured: share, Tolerance: "-", Status: StatusInfo,
			Note: "summed lateness of the baseline's wake-ups later than 150 us, share of the phase"})
	}
	if stolen >= 0 {
		r.rep.Figures = append(r.rep.Figures, Figure{Name: "CPU time stolen by the hypervisor " + phase, Unit: "ms",
			Measured: float64(stolen) / 1e6, Tolerance: "-", Status: StatusInfo, Note: "all CPUs, from /proc/stat"})
	}
	if len(missed) > 0 {
		r.warn("%s outside tolerance while the machine itself was late: a baseline thread sleeping the way the emulator's threads do woke %d times more than 150 us late (at worst %.0f us, held back%s; %v of CPU time stolen by the hypervisor). A delayed departure delays every packet behind it, so when the machine holds threads back for a few tenths of a percent of the time, more than 1%% of the probes arrive late and the p99 misses: the emulator cannot be more precise than its host. Calibrate again on a quiet or bare-metal machine",
			strings.Join(missed, ", "), m.Over150us, float64(m.LateMaxNs)/1e3, held, max(stolen, 0))
	}
}

// isDelayFigure reports whether a probe-phase figure is a timing one (delay
// percentiles and jitter) that late wake-ups of the machine can push out.
func isDelayFigure(name string) bool {
	return strings.HasPrefix(name, "delay p") || strings.HasPrefix(name, "jitter")
}

// wakeFigures reports how late the emulator's thread woke for departures
// during a phase (its own timing error, before the kernel delivers).
func (r *run) wakeFigures(dir int, label string, before, after forward.Stats) {
	n := after.TimerWakeups - before.TimerWakeups
	if n == 0 {
		return
	}
	f := Figure{Direction: dirNames[dir], Name: "emulator wake-up lateness mean " + label, Unit: "us",
		Measured: float64(after.LateSumNs-before.LateSumNs) / float64(n) / 1e3, Tolerance: "-", Status: StatusInfo,
		Note: fmt.Sprintf("%d timer wake-ups", n)}
	r.rep.Figures = append(r.rep.Figures, f)
	if after.LateMaxNs > before.LateMaxNs {
		r.rep.Figures = append(r.rep.Figures, Figure{Direction: dirNames[dir], Name: "emulator wake-up lateness max " + label, Unit: "us",
			Measured: float64(after.LateMaxNs) / 1e3, Tolerance: "-", Status: StatusInfo})
	}
}

func fmtBps(bps float64) string {
	switch {
	case bps >= 1e9:
		return trimFloat(bps/1e9) + " Gbit/s"
	case bps >= 1e6:
		return trimFloat(bps/1e6) + " Mbit/s"
	}
	return trimFloat(bps/1e3) + " kbit/s"
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/child"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/netns"
)

// Protocols of the throughput comparison.
const (
	protoTCP  = "tcp"  // kernel TCP, no TLS: a source writing zeros
	protoTLS  = "tls"  // quicbench's raw protocol over TLS 1.3 over TCP
	protoQUIC = "quic" // quicbench's raw protocol over one quic-go stream
)

var bulkProtos = []string{protoTCP, protoTLS, protoQUIC}

// bulkEnd is one environment's bulk servers: a bulk server child process
// (a plain TCP source and quicbench's endpoint server, raw protocol on
// TLS/TCP and QUIC) in the server namespace. Every transfer's client is a
// child process of its own in the client namespace.
//
// The endpoints run in their own processes, as `quicbench run`'s do,
// because this process hosts the emulator: its forwarding threads sleep in
// raw system calls holding their Go Ps, so timer-driven Go code sharing the
// process (quic-go's pacing and ACK timers, crypto/tls) stalls for
// milliseconds, which would measure this process's scheduling instead of
// the link.
type bulkEnd struct {
	e     doer
	exe   string
	cc    string
	srv   *bulkProc
	ready bulkServerReady
}

// bulkReadyTimeout bounds how long a bulk server child may take to listen.
const bulkReadyTimeout = 30 * time.Second

func startBulkEnd(ctx context.Context, e doer, exe, cc string) (*bulkEnd, error) {
	b := &bulkEnd{e: e, exe: exe, cc: cc}
	// The server lives until Close, whatever happens to ctx.
	p, err := startBulkProc(context.WithoutCancel(ctx), e, netns.Server, exe, bulkRoleServer)
	if err != nil {
		return nil, fmt.Errorf("bulk server: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, bulkReadyTimeout)
	defer cancel()
	err = p.ctl.Call(rctx, control.Listen, bulkServerConfig{Host: e.Addr(netns.Server), CC: cc}, &b.ready)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("no ready line within %v", bulkReadyTimeout)
	}
	if err == nil && (b.ready.TCP == "" || b.ready.Raw == "" || b.ready.CAPEM == "") {
		err = fmt.Errorf("incomplete ready line %+v", b.ready)
	}
	if err == nil {
		_, err = certs.PoolFromPEM([]byte(b.ready.CAPEM))
	}
	if err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("bulk server: %v (%s)", err, p.Describe())
	}
	b.srv = p
	return b, nil
}

// Close ends the server child (end of its stdin) and reaps it, killing it
// if it does not exit within 3 s.
func (b *bulkEnd) Close() error {
	if b.srv == nil {
		return nil
	}
	b.srv.Stop(3 * time.Second)
	b.srv = nil
	return nil
}

// goodput downloads with proto for d and returns the steady-state goodput
// in bit/s (the first fifth of the transfer left out), measured by a client
// child process in the client namespace. paceBytes (bytes/s, 0: unpaced)
// paces the TCP source. window, if set, is called when the child reports
// that the measured window starts and ends.
func (b *bulkEnd) goodput(ctx context.Context, proto string, d time.Duration, paceBytes uint64, window func(start bool)) (float64, error) {
	addr := b.ready.Raw
	switch proto {
	case protoTCP:
		addr = b.ready.TCP
	case protoTLS, protoQUIC:
	default:
		return 0, fmt.Errorf("unknown protocol %q", proto)
	}
	req := bulkClientConfig{
		Proto: proto, Local: b.e.Addr(netns.Client), Addr: addr, ServerName: b.e.Addr(netns.Server).String(),
		CAPEM: b.ready.CAPEM, CC: b.cc, Duration: d, PaceBytes: paceBytes,
	}
	// Dial, handshake and first byte have 10 s each in the child.
	cctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	p, err := startBulkProc(cctx, b.e, netns.Client, b.exe, bulkRoleClient)
	if err != nil {
		return 0, fmt.Errorf("bulk client: %w", err)
	}
	defer p.Stop(time.Second)
	var res bulkResult
	var unknown string
	err = p.ctl.CallNotes(cctx, control.Transfer, req, &res, func(note string, _ json.RawMessage) {
		switch note {
		case bulkNoteStart, bulkNoteEnd:
			if window != nil {
				window(note == bulkNoteStart)
			}
		default:
			unknown = note
		}
	})
	var re *control.RemoteError
	switch {
	case unknown != "":
		return 0, fmt.Errorf("bulk client: unknown note %q", unknown)
	case err == nil:
		return res.Bps, nil
	case errors.As(err, &re):
		select {
		case <-b.srv.Exited():
			return 0, fmt.Errorf("%s (the bulk server has exited: %s)", re.Msg, b.srv.Describe())
		default:
			return 0, errors.New(re.Msg)
		}
	}
	p.Stop(time.Second)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if cctx.Err() != nil {
		return 0, fmt.Errorf("bulk client: no result within %v", d+time.Minute)
	}
	return 0, fmt.Errorf("bulk client: %v (%s)", err, p.Describe())
}

// bulkProc is a calibrate-bulk child process and the client of its role.
type bulkProc struct {
	*child.Process
	ctl *control.Client
}

// startBulkProc starts `exe calibrate-bulk role` in side s's namespace of
// e. ctx kills it.
func startBulkProc(ctx context.Context, e doer, s netns.Side, exe, role string) (*bulkProc, error) {
	return startBulkCmd(e.Command(ctx, s, exe, BulkCommand, role), role)
}

// startBulkCmd starts cmd, a calibrate-bulk child in the given role.
func startBulkCmd(cmd *exec.Cmd, role string) (*bulkProc, error) {
	c, err := child.Start(cmd)
	if err != nil {
		return nil, err
	}
	return &bulkProc{Process: c, ctl: control.NewClient(bulkRoles[role], c.Stdin, c.Stdout)}, nil
}

// bulkEnds are the servers of both paths.
type bulkEnds struct{ veth, emulated *bulkEnd }

// exe is the executable of the run's children: Config.Exe, or this one.
func (r *run) exe() (string, error) {
	if r.cfg.Exe != "" {
		return r.cfg.Exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the executable to start children with: %w", err)
	}
	return exe, nil
}

func (r *run) startBulkEnds() (*bulkEnds, error) {
	exe, err := r.exe()
	if err != nil {
		return nil, fmt.Errorf("bulk endpoints: %w", err)
	}
	v, err := startBulkEnd(r.ctx, r.veth, exe, r.cfg.CC)
	if err != nil {
		return nil, fmt.Errorf("veth servers: %w", err)
	}
	e, err := startBulkEnd(r.ctx, r.tb, exe, r.cfg.CC)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("emulated path servers: %w", err)
	}
	return &bulkEnds{veth: v, emulated: e}, nil
}

func (b *bulkEnds) Close() error { return errors.Join(b.veth.Close(), b.emulated.Close()) }

// throughput compares bulk goodput through the emulated link and over the
// veth pair, and measures the emulator's CPU at 100 Mbit/s.
func (r *run) throughput() error {
	ends, err := r.startBulkEnds()
	if err != nil {
		return err
	}
	defer ends.Close()
	if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
		return err
	}
	for _, p := range bulkProtos {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		g := r.compare(ends, p)
		if g.Error != "" {
			r.warn("throughput %s: %s", p, g.Error)
		}
		r.rep.Goodput = append(r.rep.Goodput, g)
	}
	return r.cpu(ends)
}

// compare runs one transfer of proto over the veth pair, then one through
// the emulated link.
func (r *run) compare(ends *bulkEnds, p string) Goodput {
	g := Goodput{Proto: p}
	var errs []error
	for _, env := range []string{"veth", "emulated"} {
		end := ends.veth
		if env == "emulated" {
			end = ends.emulated
		}
		r.progress("throughput: %s over the %s path for %v", p, env, r.cfg.Duration)
		var before outside
		if env == "emulated" {
			before = r.outsideSnapshot()
		}
		drops0, derr0 := udpReceiveDrops(end.e, netns.Client)
		bps, err := end.goodput(r.ctx, p, r.cfg.Duration, 0, nil)
		drops1, derr1 := udpReceiveDrops(end.e, netns.Client)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
		}
		if env == "emulated" {
			r.checkOutside("throughput "+p, before, dirUp, dirDown)
			g.EmulatedBps = bps
		} else {
			g.VethBps = bps
		}
		if p == protoQUIC && derr0 == nil && derr1 == nil {
			if env == "veth" {
				g.VethReceiveDrops = drops1 - drops0
			} else {
				g.EmulatedReceiveDrops = drops1 - drops0
			}
		}
	}
	if g.VethBps > 0 {
		g.Ratio = g.EmulatedBps / g.VethBps
	}
	if err := errors.Join(errs...); err != nil {
		g.Error = err.Error()
	}
	return g
}

// cpuLoad is the fixed load of the CPU figures, in bit/s.
const cpuLoad = 100e6

// cpu measures what the emulator costs the machine while it carries
// 100 Mbit/s, each load also carried over the veth pair in the same run,
// and each measured as the CPU it takes from a soaker (soak.go):
//
//   - paced TCP (TSO super-packets one way, ACKs the other) and UDP
//     datagrams sent one per system call (per-packet work only), through
//     a link with no impairment, against the plain veth pair: the cost of
//     forwarding;
//   - unpaced TCP through "rate 100mbit" each way, against the veth pair
//     shaped by the kernel's tbf at the same rate: the cost of a rate
//     enforced in user space, one timed departure per wire packet;
//   - paced TCP through the run's own links, when they impair: there is no
//     kernel equivalent here (no netem) to compare with, so this figure has
//     no baseline, and its endpoints behave differently at another
//     round-trip time anyway.
func (r *run) cpu(ends *bulkEnds) error {
	figures, err := r.cpuFigures(ends)
	if err != nil {
		return err
	}
	for _, f := range figures {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		r.progress("emulator CPU: %s, %v each way", f.what, r.cfg.Duration)
		c, err := r.takeCPU(f)
		if err != nil {
			return err
		}
		r.rep.CPU = append(r.rep.CPU, c)
	}
	return nil
}

// cpuFigure is one of the CPU figures.
type cpuFigure struct {
	name     string // for benchmarks
	what     string // for progress
	up, down spec.Link
	take     func() (CPU, error)
}

// cpuFigures lists the CPU figures of cpu, in order.
func (r *run) cpuFigures(ends *bulkEnds) ([]cpuFigure, error) {
	none, err := spec.Parse("")
	if err != nil {
		return nil, err
	}
	figures := []cpuFigure{
		{"tcp-paced", "100 Mbit/s of paced TCP, no impairment", none, none, func() (CPU, error) {
			return r.cpuTCP(ends, uint64(cpuLoad/8), "TCP paced at 100 Mbit/s, no impairment, server to client", "veth")
		}},
		{"udp-datagrams", "100 Mbit/s of UDP datagrams, no impairment", none, none, r.cpuUDP},
		// cpuRated sets the rate itself, on the veth pair too.
		{"tcp-rate-limited", fmt.Sprintf("TCP through %q, and over veth shaped by tbf", cpuRateLink), none, none, func() (CPU, error) { return r.cpuRated(ends) }},
	}
	if up, down := r.links[0].String(), r.links[1].String(); up != "" || down != "" {
		figures = append(figures, cpuFigure{"tcp-paced-link", "100 Mbit/s of paced TCP through the run's links", r.links[0], r.links[1], func() (CPU, error) {
			return r.cpuTCP(ends, uint64(cpuLoad/8), fmt.Sprintf("TCP paced at 100 Mbit/s through the run's links (up %q, down %q), server to client", up, down), "")
		}})
	}
	return figures, nil
}

// takeCPU takes figure f with the testbed's links set to f's, and sets the
// run's links again after.
func (r *run) takeCPU(f cpuFigure) (CPU, error) {
	if err := r.tb.SetLink(f.up, f.down, r.cfg.Seed); err != nil {
		return CPU{}, err
	}
	c, err := f.take()
	return c, errors.Join(err, r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed))
}

// cpuRateLink is the link of the rate-limited CPU figure: the emulator
// paces every wire packet.
const cpuRateLink = "rate 100mbit"

// cpuRated is the emulator's CPU over an unpaced TCP download through
// cpuRateLink in both directions. Its baseline is the same unpaced
// download over the veth pair shaped by the kernel's token bucket filter
// at the same rate each way, which, like the emulator, lets every wire
// packet leave by itself at its time: the receiving stack then gets one
// packet at a time in both cases, and the difference is the cost of doing
// the shaping in user space. The testbed's links are the caller's to set
// again after.
func (r *run) cpuRated(ends *bulkEnds) (CPU, error) {
	rated, err := spec.Parse(cpuRateLink)
	if err != nil {
		return CPU{}, err
	}
	if err := r.tb.SetLink(rated, rated, r.cfg.Seed); err != nil {
		return CPU{}, err
	}
	if err := r.veth.SetRate(uint64(cpuLoad / 8)); err != nil {
		return CPU{}, err
	}
	c, err := r.cpuTCP(ends, 0, "TCP unpaced through \""+cpuRateLink+"\" each way, server to client", "veth, tbf rate 100mbit each way")
	return c, errors.Join(err, r.veth.SetRate(0))
}

// cpuTCP is the emulator's CPU over a TCP download paced by its sender at
// pace bytes/s (0: not paced) through the testbed's links as they are set,
// next to the CPU of the same download over the veth pair as it is set,
// described by baseline ("" for no baseline). A failed transfer is the
// figure's Error; the error return is for a soaker that failed.
func (r *run) cpuTCP(ends *bulkEnds, pace uint64, load, baseline string) (CPU, error) {
	c := CPU{Load: load, Baseline: baseline}
	carry := func(end *bulkEnd) func(window func(bool)) (float64, error) {
		return func(window func(bool)) (float64, error) {
			return end.goodput(r.ctx, protoTCP, r.cfg.Duration, pace, window)
		}
	}
	var base func(window func(bool)) (float64, error)
	if baseline != "" {
		base = carry(ends.veth)
	}
	return c, r.measureCPU(&c, carry(ends.emulated), base)
}

// cpuUDP is the emulator's CPU over 100 Mbit/s of 1500-byte UDP datagrams,
// one per send (no segmentation offload: per-packet work only), next to the
// CPU of the same datagrams over veth.
func (r *run) cpuUDP() (CPU, error) {
	c := CPU{Load: "UDP, 1500-byte datagrams one per send, 100 Mbit/s, client to server", Baseline: "veth"}
	carry := func(tx *sender, rx *receiver) func(window func(bool)) (float64, error) {
		return func(window func(bool)) (float64, error) {
			ph := r.nextPhase()
			col := newCollector(ph, 0, realtimeOffset())
			stop := collect([]*receiver{rx}, []*collector{col})
			fl := newBulkFlow(tx, kindBulk, ph, cpuLoad, r.cfg.Duration, nil)
			window(true)
			r.runFlows([]*flow{fl})
			window(false)
			time.Sleep(100 * time.Millisecond)
			if err := stop(); err != nil {
				return 0, err
			}
			if col.bulkLast <= col.bulkFirst {
				return 0, errors.New("no datagrams arrived")
			}
			return float64(col.bulkBytes-col.bulkFirstSize) * 8 / (float64(col.bulkLast-col.bulkFirst) / 1e9), nil
		}
	}
	return c, r.measureCPU(&c, carry(r.probeTx[dirUp], r.rx[dirUp]), carry(r.vtx, r.vrx))
}

// measureCPU fills c with one load carried through the emulator, then over
// the baseline (nil: none). Each carry function moves the load, calls
// window(true) and window(false) at the start and end of its measured
// window and returns the goodput there. The soaker's quiet rate is
// measured before (unless a figure just measured it) and after, and the
// figure uses their mean.
func (r *run) measureCPU(c *CPU, emulated, baseline func(window func(bool)) (float64, error)) error {
	s, err := r.soaker()
	if err != nil {
		return err
	}
	if s.last == nil {
		if err := s.quiet(soakIdleWindow); err != nil {
			return err
		}
	}
	before := s.last
	var m [2][2]costMark
	var soakErr error
	var bps [2]float64
	for i, carry := range []func(func(bool)) (float64, error){emulated, baseline} {
		if carry == nil {
			continue
		}
		bps[i], err = carry(func(start bool) {
			mk, err := r.mark(s, i == 0)
			soakErr = errors.Join(soakErr, err)
			if start {
				m[i][0] = mk
			} else {
				m[i][1] = mk
			}
		})
		if soakErr != nil {
			return soakErr
		}
		if err != nil {
			c.Error = err.Error()
			if i == 1 {
				c.Error = "baseline: " + c.Error
			}
			c.GoodputBps = bps[0]
			return nil
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
	}
	if err := s.quiet(soakIdleWindow); err != nil {
		return err
	}
	idle := make([]float64, len(before))
	for i := range idle {
		idle[i] = (before[i] + s.last[i]) / 2
	}
	c.GoodputBps = bps[0]
	if err := c.setEmulated(m[0][0], m[0][1], idle); err != nil {
		return err
	}
	return c.setBaseline(m[1][0], m[1][1], idle, bps[1])
}

// soaker returns the run's soaker, started at the first call.
func (r *run) soaker() (*soaker, error) {
	if r.soak != nil {
		return r.soak, nil
	}
	exe, err := r.exe()
	if err != nil {
		return nil, err
	}
	s, err := startSoaker(r.ctx, exe)
	if err != nil {
		return nil, err
	}
	r.soak = s
	r.closers = append(r.closers, s)
	return s, nil
}

// costMark is a snapshot of what the CPU figures are computed from.
type costMark struct {
	soak    soakMark
	threads time.Duration // the forwarding threads' CPU so far
	fwd     [2]forward.Stats
	ctr     [2]emu.Counters
}

// mark takes a costMark: the soaker's counts and, for the emulated path,
// the forwarder's CPU and counters.
func (r *run) mark(s *soaker, emulated bool) (costMark, error) {
	var m costMark
	if emulated {
		m.threads = r.tb.ForwarderCPU()
		m.fwd[0], m.fwd[1] = r.tb.ForwarderStats()
		m.ctr[0], m.ctr[1] = r.tb.Counters()
	}
	var err error
	m.soak, err = s.mark()
	return m, err
}

// setEmulated fills the figures of the transfer through the emulator
// between a and b, with the soaker's quiet rates idle.
func (c *CPU) setEmulated(a, b costMark, idle []float64) error {
	wall := time.Duration(b.soak.Ns - a.soak.Ns)
	if wall <= 0 {
		return errors.New("soaker: marks out of order")
	}
	c.CorePercent = 100 * float64(b.threads-a.threads) / float64(wall)
	taken, err := coresTaken(idle, b.soak, a.soak)
	if err != nil {
		return err
	}
	c.MachinePercent = 100 * taken
	var calls, wakeups, packets uint64
	for d := range 2 {
		f0, f1 := a.fwd[d], b.fwd[d]
		wakeups += f1.Wakeups - f0.Wakeups
		calls += (f1.Wakeups - f0.Wakeups) + (f1.Reads - f0.Reads) + (f1.EmptyReads - f0.EmptyReads) +
			(f1.ReadErrors - f0.ReadErrors) + (f1.Writes - f0.Writes) + (f1.WriteErrors - f0.WriteErrors)
		packets += b.ctr[d].Sub(a.ctr[d]).PacketsOut
	}
	if packets > 0 {
		c.SyscallsPerPacket = float64(calls) / float64(packets)
		c.WakeupsPerPacket = float64(wakeups) / float64(packets)
	}
	return nil
}

// setBaseline fills the figures of the same load over the baseline between
// a and b, which delivered baseBps: the CPU there is scaled to the goodput
// through the emulator (the stacks' work grows with the bytes they move),
// and NetPercent is what the emulated path took beyond it.
func (c *CPU) setBaseline(a, b costMark, idle []float64, baseBps float64) error {
	if baseBps <= 0 {
		return nil
	}
	taken, err := coresTaken(idle, b.soak, a.soak)
	if err != nil {
		return err
	}
	c.VethGoodputBps = baseBps
	c.VethMachinePercent = 100 * taken
	c.NetPercent = c.MachinePercent - c.VethMachinePercent*c.GoodputBps/baseBps
	return nil
}

// udpReceiveDrops reads the UDP datagrams side's namespace dropped for want
// of socket buffer space (netns.ReadUDPReceiveBufferErrors): a QUIC
// receiver that cannot keep up loses packets there, which its sender takes
// for congestion. e is a testbed or the veth pair.
func udpReceiveDrops(e doer, s netns.Side) (uint64, error) {
	var n uint64
	err := e.Do(s, func() error {
		var err error
		n, err = netns.ReadUDPReceiveBufferErrors()
		return err
	})
	return n, err
}

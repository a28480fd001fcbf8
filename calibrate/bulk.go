package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/internal/child"
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
	p, err := startBulkProc(context.WithoutCancel(ctx), e, netns.Server, exe, bulkRoleServer,
		bulkServerConfig{Host: e.Addr(netns.Server), CC: cc})
	if err != nil {
		return nil, fmt.Errorf("bulk server: %w", err)
	}
	got := make(chan error, 1)
	go func() { got <- p.dec.Decode(&b.ready) }()
	select {
	case err = <-got:
	case <-time.After(bulkReadyTimeout):
		err = fmt.Errorf("no ready line within %v", bulkReadyTimeout)
	case <-ctx.Done():
		err = ctx.Err()
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
	p, err := startBulkProc(cctx, b.e, netns.Client, b.exe, bulkRoleClient, req)
	if err != nil {
		return 0, fmt.Errorf("bulk client: %w", err)
	}
	defer p.Stop(time.Second)
	for {
		var ev bulkEvent
		if err := p.dec.Decode(&ev); err != nil {
			p.Stop(time.Second)
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if cctx.Err() != nil {
				return 0, fmt.Errorf("bulk client: no result within %v", d+time.Minute)
			}
			return 0, fmt.Errorf("bulk client: %v (%s)", err, p.Describe())
		}
		switch ev.Event {
		case bulkEventStart, bulkEventEnd:
			if window != nil {
				window(ev.Event == bulkEventStart)
			}
		case bulkEventResult:
			if ev.Error != "" {
				return 0, errors.New(ev.Error)
			}
			return ev.Bps, nil
		default:
			return 0, fmt.Errorf("bulk client: unknown event %q", ev.Event)
		}
	}
}

// bulkProc is a calibrate-bulk child process, its stdout decoded as JSON
// lines.
type bulkProc struct {
	*child.Process
	dec *json.Decoder
}

// startBulkProc starts `exe calibrate-bulk role` in side s's namespace of e
// and writes cfg to its stdin. ctx kills it.
func startBulkProc(ctx context.Context, e doer, s netns.Side, exe, role string, cfg any) (*bulkProc, error) {
	line, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	c, err := child.Start(e.Command(ctx, s, exe, BulkCommand, role))
	if err != nil {
		return nil, err
	}
	p := &bulkProc{Process: c, dec: json.NewDecoder(c.Stdout)}
	if _, err := p.Stdin.Write(append(line, '\n')); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("configuring the %s child: %v (%s)", role, err, p.Describe())
	}
	return p, nil
}

// bulkEnds are the servers of both paths.
type bulkEnds struct{ veth, emulated *bulkEnd }

func (r *run) startBulkEnds() (*bulkEnds, error) {
	exe := r.cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bulk endpoints: the executable to start: %w", err)
		}
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
	return r.cpu(ends.emulated)
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

// cpu measures the emulator's CPU while it carries 100 Mbit/s of paced TCP
// (TSO super-packets one way, ACKs the other), of UDP datagrams sent one
// per system call (per-packet work only), and of unpaced TCP through a
// 100 Mbit/s rate the emulator enforces itself (every wire packet departs
// at its own time: one timed wake-up and one write per packet).
func (r *run) cpu(b *bulkEnd) error {
	if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
		return err
	}
	r.progress("emulator CPU: 100 Mbit/s of paced TCP for %v", r.cfg.Duration)
	r.rep.CPU = append(r.rep.CPU, r.cpuTCP(b, uint64(cpuLoad/8), "TCP paced at 100 Mbit/s, server to client"))
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.progress("emulator CPU: 100 Mbit/s of UDP datagrams for %v", r.cfg.Duration)
	c, err := r.cpuUDP()
	if err != nil {
		return err
	}
	r.rep.CPU = append(r.rep.CPU, c)
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.progress("emulator CPU: TCP through %q for %v", cpuRateLink, r.cfg.Duration)
	c, err = r.cpuRated(b)
	if err != nil {
		return err
	}
	r.rep.CPU = append(r.rep.CPU, c)
	return nil
}

// cpuRateLink is the link of the third CPU figure: the emulator paces.
const cpuRateLink = "rate 100mbit"

// cpuRated is the emulator's CPU over an unpaced TCP download through
// cpuRateLink in both directions; the run's own links are set again after.
func (r *run) cpuRated(b *bulkEnd) (CPU, error) {
	rated, err := spec.Parse(cpuRateLink)
	if err != nil {
		return CPU{}, err
	}
	if err := r.tb.SetLink(rated, rated, r.cfg.Seed); err != nil {
		return CPU{}, err
	}
	c := r.cpuTCP(b, 0, "TCP unpaced through \""+cpuRateLink+"\" each way, server to client")
	return c, r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed)
}

// cpuTCP is the emulator's CPU over a TCP download, paced by the sender at
// pace bytes/s (0: not paced).
func (r *run) cpuTCP(b *bulkEnd, pace uint64, load string) CPU {
	var cpu0, cpu1 time.Duration
	var t0, t1 time.Time
	bps, err := b.goodput(r.ctx, protoTCP, r.cfg.Duration, pace, func(start bool) {
		if start {
			cpu0, t0 = r.tb.ForwarderCPU(), time.Now()
		} else {
			cpu1, t1 = r.tb.ForwarderCPU(), time.Now()
		}
	})
	c := CPU{Load: load, GoodputBps: bps}
	if err != nil {
		c.Error = err.Error()
	} else if t1.After(t0) {
		c.CorePercent = 100 * float64(cpu1-cpu0) / float64(t1.Sub(t0))
	}
	return c
}

// cpuUDP is the emulator's CPU over 100 Mbit/s of 1500-byte UDP datagrams,
// one per send (no segmentation offload: per-packet work only).
func (r *run) cpuUDP() (CPU, error) {
	ph := r.nextPhase()
	col := newCollector(ph, 0, realtimeOffset())
	stop := collect([]*receiver{r.rx[dirUp]}, []*collector{col})
	fl := newBulkFlow(r.probeTx[dirUp], kindBulk, ph, cpuLoad, r.cfg.Duration, nil)
	cpu0, t0 := r.tb.ForwarderCPU(), time.Now()
	r.runFlows([]*flow{fl})
	cpu1, t1 := r.tb.ForwarderCPU(), time.Now()
	time.Sleep(100 * time.Millisecond)
	if err := stop(); err != nil {
		return CPU{}, err
	}
	c := CPU{Load: "UDP, 1500-byte datagrams one per send, 100 Mbit/s, client to server",
		CorePercent: 100 * float64(cpu1-cpu0) / float64(t1.Sub(t0))}
	if col.bulkLast > col.bulkFirst {
		c.GoodputBps = float64(col.bulkBytes-col.bulkFirstSize) * 8 / (float64(col.bulkLast-col.bulkFirst) / 1e9)
	}
	return c, nil
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

package runner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

const (
	// agentGrace is added to a sample's timeout before the runner gives up
	// on the agent and restarts it.
	agentGrace = 15 * time.Second
	// browserStartGrace is added too for a browser client's sample, whose
	// agent may have to start its kept browser first (bounded by
	// workload.BrowserStartTimeout; on a saturated machine Firefox took
	// more than 20 s).
	browserStartGrace = workload.BrowserStartTimeout
	// cpuPoll is the period of the server CPU timeline of the cpu test.
	cpuPoll = workload.CPUSampleInterval
)

// startEndpoints starts the server of implementation impl and, when none
// runs, the client agent. The testbed's routes give cc to every TCP
// connection across the link, the server's and the client's, whatever
// their sockets ask for (useServer keeps them on the cell's cc).
func (r *slot) startEndpoints(ctx context.Context, impl, cc string) error {
	if err := r.tb.SetCC(cc); err != nil {
		return fmt.Errorf("testbed congestion control: %w", err)
	}
	args, err := r.serverArgs(impl, cc)
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, r.tb, r.opts.Exe, args)
	if err != nil {
		return err
	}
	if srv.info.Impl == "" {
		srv.info.Impl = model.ServerQuicbench
	}
	if srv.info.Impl != impl {
		srv.close()
		return fmt.Errorf("server: asked for the %s server, got %q", impl, srv.info.Impl)
	}
	if impl != model.ServerQuicbench {
		if err := r.db.SetRunPeer(context.WithoutCancel(ctx), r.runRec.ID, impl+" server", srv.info.Version); err != nil {
			srv.close()
			return fmt.Errorf("store the %s server's version: %w", impl, err)
		}
	}
	r.srv, r.cc = srv, cc
	if r.agent == nil {
		a, err := startAgent(ctx, r.tb, r.opts.Exe)
		if err != nil {
			return err
		}
		r.agent = a
	}
	return nil
}

// serverArgs are the arguments of `quicbench serve --control` for a server
// of implementation impl whose sockets use congestion control cc.
func (r *slot) serverArgs(impl, cc string) ([]string, error) {
	// The cell's cc: the testbed's routes give it to every TCP connection
	// (startEndpoints); over QUIC the server runs it when it can choose.
	args := []string{"--host", r.tb.Addr(netns.Server).String(), "--cc", cc}
	if impl != model.ServerQuicbench {
		args = append(args, "--impl", impl, "--port", strconv.Itoa(serverPort(impl)))
		ca, err := contractArgs(impl)
		if err != nil {
			return nil, err
		}
		args = append(args, ca...)
		if servesFiles(impl) {
			for _, p := range r.filePaths(impl) {
				args = append(args, "--path", p)
			}
		}
	}
	if !r.opts.QUICEvents {
		args = append(args, "--no-quic-events")
	}
	for _, s := range sortedValues(r.sites) {
		args = append(args, "--site", s)
	}
	if impl == model.ServerQuicbench {
		ra, err := r.replayServerArgs() // runner/replay.go
		if err != nil {
			return nil, err
		}
		args = append(args, ra...)
	}
	if kl := r.serverKeyLog(impl); kl != "" {
		args = append(args, "--keylog", kl) // runner/capture.go
	}
	if r.opts.QlogDir != "" {
		args = append(args, "--qlog", r.opts.QlogDir)
	}
	return args, nil
}

// serverDied reports how the server process ended, or "" while it runs.
func (r *slot) serverDied() string {
	select {
	case <-r.srv.Exited():
		return r.srv.Describe()
	default:
		return ""
	}
}

// reviveServer restarts a server process that has exited (killed, crashed)
// as the agent is restarted, and records that as a run warning; a failed
// restart ends the run.
func (r *slot) reviveServer(ctx context.Context, c *model.Cell, it int) error {
	how := r.serverDied()
	if how == "" {
		return nil
	}
	r.srv.Stop(time.Second)
	r.srv = nil
	if err := r.startEndpoints(ctx, c.ServerImpl(), r.cc); err != nil {
		return fmt.Errorf("the server process had exited (%s) and restarting it failed: %w", how, err)
	}
	msg := fmt.Sprintf("server process exited (%s) before %s iteration %d; restarted", how, c.Key, it)
	if err := r.db.AddRunWarning(context.WithoutCancel(ctx), r.runRec.ID, msg); err != nil {
		return fmt.Errorf("store a run warning: %w", err)
	}
	return nil
}

// useServer makes the server of implementation impl, with congestion
// control cc, the slot's current one (only at cell group boundaries does
// it change). The current server of another implementation is parked,
// still running, and a parked one of impl is taken back. A new congestion
// control applies to new listening sockets: a server of impl with
// another one is restarted with it.
func (r *slot) useServer(ctx context.Context, impl, cc string) error {
	if r.srv != nil && r.srv.info.Impl == impl && r.cc == cc {
		return nil
	}
	if r.srv != nil && r.srv.info.Impl != impl && isCommandServer(r.srv.info.Impl) {
		// contract servers all listen on port 443: never parked
		r.srv.close()
		r.srv = nil
	}
	if r.srv != nil && r.srv.info.Impl != impl {
		if r.parked == nil {
			r.parked = map[string]*serverProc{}
		}
		r.srv.cc = r.cc
		r.parked[r.srv.info.Impl] = r.srv
		r.srv = nil
	}
	if p := r.parked[impl]; p != nil {
		delete(r.parked, impl)
		r.srv, r.cc = p, p.cc
		if r.cc == cc {
			// The routes may carry another server's cc since it was parked.
			if r.tb.CC() != cc {
				if err := r.tb.SetCC(cc); err != nil {
					return fmt.Errorf("testbed congestion control: %w", err)
				}
			}
			return nil
		}
	}
	if r.srv != nil {
		r.srv.close()
		r.srv = nil
	}
	return r.startEndpoints(ctx, impl, cc)
}

// filePaths are the URL paths that the plan's cells served by impl (a
// server of files) request, for it to serve them from files (serve
// --path).
func (r *slot) filePaths(impl string) []string {
	seen := map[string]bool{}
	var out []string
	for i := range r.cells {
		c := &r.cells[i]
		if c.ServerImpl() != impl {
			continue
		}
		params, err := r.requestParams(c)
		if err != nil {
			continue // requestParams fails the sample that needs it, with its error
		}
		for _, p := range workload.StaticPaths(c.Test, params) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// sample takes one step and stores it. An error means the run cannot go on
// (storage failure, endpoints that cannot be restarted); a failed
// measurement is a stored sample, not an error.
func (r *slot) sample(ctx context.Context, step Step) (*model.Sample, error) {
	c := step.Cell
	r.overhead.start()
	if err := r.useServer(ctx, c.ServerImpl(), c.CC); err != nil {
		return nil, err
	}
	if err := r.reviveServer(ctx, c, step.Iteration); err != nil {
		return nil, err
	}
	up, down, err := r.linksOf(c)
	if err != nil {
		return nil, err
	}
	if err := r.tb.SetLink(up, down, step.Seed); err != nil {
		return nil, fmt.Errorf("set link for %s: %w", c.Key, err)
	}
	if err := r.recordEnv(ctx, false); err != nil {
		return nil, fmt.Errorf("store the run's environment: %w", err)
	}
	s := &model.Sample{
		CellID: c.ID, Iteration: step.Iteration, Warmup: step.Warmup(), Order: step.Order,
		Seed: step.Seed, Started: time.Now(), Slot: r.id,
	}
	params, err := r.requestParams(c)
	if err != nil {
		return nil, err
	}
	info := r.srv.info
	req := workload.Request{
		Test: c.Test, Protocol: c.Protocol, Client: c.Client, Params: params, CC: c.CC, QUICEvents: r.opts.QUICEvents,
		Timeout:        r.plan.TimeoutFor(c),
		LinkWait:       up.MaxWait() + down.MaxWait(),
		BrowserRestart: r.plan.BrowserRestart(), BrowserMemoryLimit: r.plan.BrowserMemoryLimit(), BrowserFileLimit: r.plan.BrowserFileLimit(),
		Target: workload.Target{
			Host: r.tb.Addr(netns.Server).String(), Port: info.Port, PlainPort: info.PlainPort,
			CAPEM: info.CAPEM, SPKI: info.SPKI, DirSlash: dirSlash(c.ServerImpl()),
		},
		Contract: clientDecl(c.Client),
	}

	replaying, err := r.replayBegin(c, &req) // runner/replay.go
	if err != nil {
		return nil, err
	}
	if r.capt != nil {
		req.KeyLog = r.capt.clientKeys
	}
	req.HARFile = r.harFileFor(c)
	var w window
	sc := r.captureBegin(replayCapturePorts(capturePorts(info.Port, info.PlainPort), req.Replay)) // runner/capture.go, replay.go
	if sc != nil {
		sc.harFile = req.HARFile
	}
	defer sc.cleanup()
	w.before = r.snapshot(false)
	w.start = time.Now()
	r.conc.begin(r.id)

	ccw := watchCC(r.tb)
	r.competingPorts = nil
	res, serverSeries, err := r.callWithTraffic(ctx, c, req, step.Seed) // runner/traffic.go
	s.Concurrency = r.conc.end(r.id)
	w.end = time.Now()
	seen, ccErr := ccw.finish()
	// The competing flows' connections run their own congestion control
	// (their spec's, which package traffic checks) and are not the
	// sample's: they neither count as its transport nor against its cc.
	seen = slices.DeleteFunc(seen, func(x tcpSeen) bool { return r.competingPorts[x.serverPort()] })
	if err != nil {
		return nil, err
	}

	// The server's view of the connections (the sender's, for downloads).
	// Waiting for it also lets every connection of this sample finish its
	// close before the link is reset for the next one.
	var serverStats []model.TransportStats
	var stillOpen int
	if len(res.Conns) > 0 {
		serverStats, stillOpen = r.serverStats(res.Conns)
		s.Drain = time.Since(w.end)
	}
	w.after = r.snapshot(true)
	sc.end(ctx, c, step.Iteration, &w)

	s.Status, s.Error = res.Status, res.Error
	if how := r.serverDied(); how != "" && s.Status == model.StatusFailed {
		s.Error += fmt.Sprintf(" (the server process had exited: %s)", how)
	}
	s.Metrics = res.Metrics
	s.Negotiated = res.Negotiated
	s.Transport = res.Transport
	for i := range s.Transport {
		s.Transport[i].Side = "client"
	}
	s.Transport = append(s.Transport, serverStats...)
	recordCC(c, s, seen, ccErr)
	checkQUICCC(c, s)
	s.Timelines = append(res.Timelines, serverSeries...)
	s.Resources = res.Resources
	s.Wall = res.Wall
	s.CPU = res.CPU
	srvCPU := w.before.srvErr == nil && w.after.srvErr == nil
	if srvCPU {
		d := w.after.srvCPU.Sub(w.before.srvCPU)
		s.CPU.ServerUser, s.CPU.ServerSys = d.User, d.Sys
	} else {
		s.Warnings = append(s.Warnings, "server CPU time unavailable")
	}
	if res.ClientCPUUnavailable {
		s.Warnings = append(s.Warnings, "client CPU time unavailable")
	}
	s.Warnings = append(s.Warnings, res.Warnings...) // the client's (a browser restarted or failed)
	if stillOpen > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("server statistics of %d connection(s) read while still open: the client's close had not arrived after %v (lost on the link?)", stillOpen, serverStatsWait))
	}
	s.LinkUp, s.LinkDown = w.after.link[0].Sub(w.before.link[0]), w.after.link[1].Sub(w.before.link[1])
	cpuMetrics(s.Metrics, s.CPU, res.Bytes, !res.ClientCPUUnavailable, srvCPU, s.Status == model.StatusOK)
	transportMetrics(s.Metrics, s.Transport, len(res.Conns))
	s.Warnings = append(s.Warnings, w.warnings(c, up, down, s, res)...)
	if replaying {
		r.replayEnd(s, c.Protocol)
	}

	if s.Metrics[workload.WireTimed] == 1 {
		wireMetrics(c, s, sc, res.Bytes)
	}
	if v, ok := s.Metrics[c.Metric]; ok {
		s.Value = v
	} else if s.Status == model.StatusOK {
		s.Status = model.StatusFailed
		s.Error = fmt.Sprintf("the test did not produce its primary metric %s", c.Metric)
	}
	sc.store(ctx, s)
	s.Overhead = r.overhead.storing(s.Wall)
	s.Prep = prepPart(res.Prep, s.Overhead, s.Drain)
	if err := r.db.InsertSample(context.WithoutCancel(ctx), s); err != nil {
		return nil, fmt.Errorf("store sample: %w", err)
	}
	return s, nil
}

// cpuMetrics adds the CPU cost per megabyte moved of a valid sample that
// moved bytes: the client's, the server's and their sum, each only when the
// CPU times it needs were read (absent, never 0, otherwise).
func cpuMetrics(m map[string]float64, cpu model.CPUUsage, bytes int64, client, server, ok bool) {
	if bytes <= 0 || !ok {
		return
	}
	mb := float64(bytes) / 1e6
	cl := (cpu.ClientUser + cpu.ClientSys).Seconds()
	sv := (cpu.ServerUser + cpu.ServerSys).Seconds()
	if client {
		m["cpu_client_s_per_mb"] = cl / mb
	}
	if server {
		m["cpu_server_s_per_mb"] = sv / mb
	}
	if client && server {
		m["cpu_s_per_mb"] = (cl + sv) / mb
	}
}

// transportMetrics adds the retransmissions of the sample's conns
// connections by both endpoints (TCP: segments retransmitted, QUIC: packets
// declared lost, whose frames were sent again): the sender of a transfer
// is whichever side sent it, so only the sum of both sides means the same
// for every test and transport. Absent unless both sides' statistics of
// every connection were read.
func transportMetrics(m map[string]float64, ts []model.TransportStats, conns int) {
	var client, server int
	var sum int64
	for _, t := range ts {
		if t.Retransmits < 0 {
			return
		}
		if t.Side == "server" {
			server++
		} else {
			client++
		}
		sum += t.Retransmits
	}
	if conns == 0 || client != conns || server != conns {
		return
	}
	m["retransmits"] = float64(sum)
}

// snapshot is one reading of the counters a sample is checked with.
type snapshot struct {
	dev     [2]uint64 // packets dropped from the TUN devices' queues (up, down)
	devErr  error
	udp     udpDrops        // UDP receive-buffer drops per namespace
	link    [2]emu.Counters // the emulated links' counters (up, down)
	fw      [2]forward.Stats
	srvCPU  endpoint.CPUTime // the server process's CPU time
	srvErr  error
	mach    sysinfo.CPUTimes // the machine's CPU times
	machErr error
}

// window is what the runner reads around a sample's measured part: the
// counters before and after it, and the clock at its start and end.
type window struct {
	before, after snapshot
	start, end    time.Time
}

// snapshot reads every counter source. After a sample (after) the sources
// are read in the reverse order, so that each source's interval lies within
// those of the sources read before it and the CPU times come closest to the
// measured part.
func (r *slot) snapshot(after bool) snapshot {
	var s snapshot
	read := []func(){
		func() { s.dev[0], s.dev[1], s.devErr = r.tb.DeviceDrops() },
		func() { s.udp = r.udpReceiveDrops() },
		func() { s.link[0], s.link[1] = r.counters() },
		func() { s.fw[0], s.fw[1] = r.tb.ForwarderStats() },
		func() { s.srvCPU, s.srvErr = r.srv.cpu() },
		func() { s.mach, s.machErr = sysinfo.ReadCPUTimes() },
	}
	if after {
		slices.Reverse(read)
	}
	for _, f := range read {
		f()
	}
	return s
}

// udpDrops are the UDP receive-buffer drop counters of the client and the
// server namespace (netns.Testbed.UDPReceiveBufferErrors), indexed by
// netns.Side; ok is false for a side whose reading failed.
type udpDrops struct {
	n  [2]uint64
	ok [2]bool
}

// udpReceiveDrops reads both namespaces' UDP receive-buffer drop counters.
func (r *slot) udpReceiveDrops() udpDrops {
	var u udpDrops
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		n, err := r.tb.UDPReceiveBufferErrors(s)
		u.n[s], u.ok[s] = n, err == nil
	}
	return u
}

// prepPart is the part of a sample's overhead that the test spent on its
// unmeasured preparation in the client (model.Sample.Prep), as the client
// reported it, kept within the overhead the drain leaves: the client's
// time lies inside the runner's interval, outside the measured part and
// before the drain, so only a wrong report could exceed it.
func prepPart(reported, overhead, drain time.Duration) time.Duration {
	return max(0, min(reported, overhead-drain))
}

// overheadMeter measures each sample's overhead: the time from the start
// of storing the previous sample (for the first sample of an invocation,
// from the start of the runner's work on it) to the start of storing this
// one, minus the measured part. A sample cannot contain its own storing
// (its overhead is stored with it), so it carries the previous sample's:
// over a run every transaction but the last is counted, and nothing
// between samples is left out, except the time a testbed of a parallel
// run waits between its blocks (idle until the next start).
type overheadMeter struct {
	now    func() time.Time // time.Now when nil
	from   time.Time        // start of storing the previous sample
	idleAt time.Time        // when the testbed went idle; zero while busy
}

func (m *overheadMeter) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// start marks the start of the runner's work on a sample; it only counts
// for the first sample (afterwards the previous storing is the start)
// and after idle, whose wait it takes out of the interval.
func (m *overheadMeter) start() {
	switch {
	case m.from.IsZero():
		m.from = m.clock()
	case !m.idleAt.IsZero():
		m.from = m.from.Add(m.clock().Sub(m.idleAt))
		m.idleAt = time.Time{}
	}
}

// idle marks the testbed idle after a block's last sample was stored: the
// wait until the next block's first sample is not that sample's overhead
// (a testbed of a parallel run may wait minutes for the admission rule).
func (m *overheadMeter) idle() {
	if !m.from.IsZero() {
		m.idleAt = m.clock()
	}
}

// storing returns the overhead of a sample whose measured part took wall,
// about to be stored, and starts the next sample's interval.
func (m *overheadMeter) storing(wall time.Duration) time.Duration {
	t := m.clock()
	d := t.Sub(m.from) - wall
	m.from = t
	return d
}

// callAgent runs the request in the agent. For the cpu test it polls the
// server's CPU meanwhile. A hung or dead agent is restarted and the sample
// recorded as failed.
func (r *slot) callAgent(ctx context.Context, req workload.Request) (*workload.Result, []model.Series, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	grace := agentGrace
	if peers.IsBrowser(req.Client) {
		grace += browserStartGrace
	}
	actx, cancel := context.WithTimeout(ctx, timeout+grace)
	defer cancel()
	type out struct {
		res workload.Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		var o out
		o.err = r.agent.run(actx, req, &o.res)
		ch <- o
	}()
	var series []model.Series
	var o out
	if req.Test == plan.TestCPU {
		pts := []model.Point{}
		t0 := time.Now()
		prev, perr := r.srv.cpu()
		prevT := t0
		tick := time.NewTicker(cpuPoll)
	poll:
		for {
			select {
			case o = <-ch:
				break poll
			case <-tick.C:
				if perr != nil {
					continue
				}
				cur, err := r.srv.cpu()
				if err != nil {
					perr = err
					continue
				}
				now := time.Now()
				d := cur.Sub(prev)
				pts = append(pts, model.Point{T: int64(prevT.Sub(t0)), V: float64(d.User+d.Sys) / float64(now.Sub(prevT))})
				prev, prevT = cur, now
			}
		}
		tick.Stop()
		series = append(series, model.Series{Kind: model.SeriesCPUServer, Label: "server", Points: pts})
	} else {
		o = <-ch
	}
	if o.err == nil {
		return &o.res, series, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	// The agent hung or died: restart it and record the failure.
	cause := fmt.Sprintf("client agent failed: %v (%s)", o.err, r.agent.Describe())
	r.agent.Stop(time.Second)
	r.agent = nil
	a, err := startAgent(ctx, r.tb, r.opts.Exe)
	if err != nil {
		return nil, nil, fmt.Errorf("%s; restarting it failed: %w", cause, err)
	}
	r.agent = a
	return &workload.Result{Status: model.StatusFailed, Error: cause, Metrics: map[string]float64{}}, nil, nil
}

// serverStatsWait bounds the wait for the server to see the sample's
// connections end.
const serverStatsWait = time.Second

// serverStats asks the server for its final statistics of conns, and
// counts those it read from connections still open when the wait gave up
// (the client's close lost on the link: the figures are those of that
// moment).
func (r *slot) serverStats(conns []endpoint.ConnRef) (out []model.TransportStats, stillOpen int) {
	r.srv.mu.Lock()
	replies, err := r.srv.ctl.ConnStats(serverStatsWait, conns...)
	r.srv.mu.Unlock()
	if err != nil {
		return nil, 0
	}
	for _, rep := range replies {
		if rep.Stats != nil {
			st := *rep.Stats
			st.Side = "server"
			out = append(out, st)
			if rep.Open {
				stillOpen++
			}
		}
	}
	return out, stillOpen
}

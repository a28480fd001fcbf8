package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
	"gonum.org/v1/gonum/stat/distuv"
)

// Validity thresholds.
const (
	// saturatedCPU flags a sample during which the machine's CPUs were
	// busier than this (the measurement may be CPU-bound, not network-bound).
	saturatedCPU = 0.95
	// clockSkew flags a sample during which the wall clock and the
	// monotonic clock disagreed by more than this (NTP step, suspend).
	clockSkew = 5 * time.Millisecond
	// agentGrace is added to a sample's timeout before the runner gives up
	// on the agent and restarts it.
	agentGrace = 15 * time.Second
	// cpuPoll is the period of the server CPU timeline of the cpu test.
	cpuPoll = workload.CPUSampleInterval
)

// startEndpoints starts the server (with congestion control cc on its
// sockets) and the client agent.
func (r *run) startEndpoints(ctx context.Context, cc string) error {
	args := []string{"--host", r.tb.Addr(netns.Server).String(), "--cc", cc}
	if !r.opts.QUICEvents {
		args = append(args, "--no-quic-events")
	}
	for _, s := range sortedValues(r.sites) {
		args = append(args, "--site", s)
	}
	if r.opts.KeyLogDir != "" {
		if err := os.MkdirAll(r.opts.KeyLogDir, 0o700); err != nil {
			return err
		}
		args = append(args, "--keylog", filepath.Join(r.opts.KeyLogDir, fmt.Sprintf("run%d.keys", r.runRec.ID)))
	}
	if r.opts.QlogDir != "" {
		args = append(args, "--qlog", r.opts.QlogDir)
	}
	srv, err := startServer(ctx, r.tb, r.opts.Exe, args)
	if err != nil {
		return err
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
func (r *run) sample(ctx context.Context, step Step) (*model.Sample, error) {
	c := step.Cell
	r.overhead.start()
	if c.CC != r.cc {
		// A new congestion control applies to new listening sockets: restart
		// the server with it (only at cell group boundaries).
		r.srv.close()
		r.srv = nil
		if err := r.startEndpoints(ctx, c.CC); err != nil {
			return nil, err
		}
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
		Seed: step.Seed, Started: time.Now(),
	}
	params, err := r.requestParams(c)
	if err != nil {
		return nil, err
	}
	info := r.srv.info
	req := workload.Request{
		Test: c.Test, Protocol: c.Protocol, Client: c.Client, Params: params, CC: c.CC, QUICEvents: r.opts.QUICEvents,
		Timeout: r.plan.TimeoutFor(c),
		Target: workload.Target{
			Host: r.tb.Addr(netns.Server).String(), Port: info.Port, PlainPort: info.PlainPort,
			CAPEM: info.CAPEM, SPKI: info.SPKI,
		},
	}

	devUp0, devDown0, devErr := r.tb.DeviceDrops()
	udp0 := r.udpReceiveDrops()
	upC0, downC0 := r.counters()
	fw0up, fw0down := r.tb.ForwarderStats()
	srvCPU0, srvErr := r.srv.cpu()
	mach0, machErr := sysinfo.ReadCPUTimes()
	wall0 := time.Now()
	mono0 := wall0

	res, serverSeries, err := r.callAgent(ctx, req)
	if err != nil {
		return nil, err
	}

	mono1 := time.Now()
	wall1 := time.Now().Round(0)
	// The server's view of the connections (the sender's, for downloads).
	// Waiting for it also lets every connection of this sample finish its
	// close before the link is reset for the next one.
	var serverStats []model.TransportStats
	if len(res.Conns) > 0 {
		serverStats = r.serverStats(res.Conns)
		s.Drain = time.Since(mono1)
	}
	srvCPU1, srvErr1 := r.srv.cpu()
	mach1, machErr1 := sysinfo.ReadCPUTimes()
	upC1, downC1 := r.counters()
	fw1up, fw1down := r.tb.ForwarderStats()
	devUp1, devDown1, devErr1 := r.tb.DeviceDrops()
	udp1 := r.udpReceiveDrops()

	s.Status, s.Error = res.Status, res.Error
	s.Metrics = res.Metrics
	s.Negotiated = res.Negotiated
	s.Transport = res.Transport
	for i := range s.Transport {
		s.Transport[i].Side = "client"
	}
	s.Transport = append(s.Transport, serverStats...)
	s.Timelines = append(res.Timelines, serverSeries...)
	s.Resources = res.Resources
	s.Wall = res.Wall
	s.CPU = res.CPU
	if srvErr == nil && srvErr1 == nil {
		d := srvCPU1.Sub(srvCPU0)
		s.CPU.ServerUser, s.CPU.ServerSys = d.User, d.Sys
	} else {
		s.Warnings = append(s.Warnings, "server CPU time unavailable")
	}
	s.LinkUp, s.LinkDown = upC1.Sub(upC0), downC1.Sub(downC0)
	if res.Bytes > 0 && s.Status == model.StatusOK {
		mb := float64(res.Bytes) / 1e6
		cl := (s.CPU.ClientUser + s.CPU.ClientSys).Seconds()
		sv := (s.CPU.ServerUser + s.CPU.ServerSys).Seconds()
		s.Metrics["cpu_client_s_per_mb"] = cl / mb
		s.Metrics["cpu_server_s_per_mb"] = sv / mb
		s.Metrics["cpu_s_per_mb"] = (cl + sv) / mb
	}
	s.Warnings = append(s.Warnings, validity(c, up, down, s, res)...)
	if machErr == nil && machErr1 == nil {
		if u := sysinfo.Utilisation(mach0, mach1); u > saturatedCPU {
			// One text for every such sample, so that the report counts them
			// as one warning.
			s.Warnings = append(s.Warnings, fmt.Sprintf("machine CPU saturated: more than %.0f%% busy during the sample; the result may be CPU-bound", 100*saturatedCPU))
		}
	}
	if skew := wall1.Sub(wall0.Round(0)) - mono1.Sub(mono0); skew > clockSkew || skew < -clockSkew {
		s.Warnings = append(s.Warnings, fmt.Sprintf("wall clock jumped by %v relative to the monotonic clock during the sample", skew))
	}
	s.Warnings = append(s.Warnings, forwarderWarnings(fw0up, fw0down, fw1up, fw1down)...)
	if devErr == nil && devErr1 == nil {
		if d := (devUp1 - devUp0) + (devDown1 - devDown0); d > 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("TUN device queues overflowed: %d packets dropped by the kernel outside the configured impairments", d))
		}
	}
	outside := outsideDrops(devErr == nil && devErr1 == nil, [2]uint64{devUp1 - devUp0, devDown1 - devDown0},
		[2]forward.Stats{fw0up, fw0down}, [2]forward.Stats{fw1up, fw1down})
	s.Warnings = append(s.Warnings, endpointLoss(c, s, outside)...)
	s.Warnings = append(s.Warnings, udpReceiveWarnings(udp0, udp1)...)

	if v, ok := s.Metrics[c.Metric]; ok {
		s.Value = v
	} else if s.Status == model.StatusOK {
		s.Status = model.StatusFailed
		s.Error = fmt.Sprintf("the test did not produce its primary metric %s", c.Metric)
	}
	s.Overhead = r.overhead.storing(s.Wall)
	s.Prep = prepPart(res.Prep, s.Overhead, s.Drain)
	if err := r.db.InsertSample(context.WithoutCancel(ctx), s); err != nil {
		return nil, fmt.Errorf("store sample: %w", err)
	}
	return s, nil
}

// forwarderWarnings turns what the emulator's forwarder counted during a
// sample (the counters before and after, per direction) into validity
// warnings: every packet it lost or mangled outside the configured
// impairments.
func forwarderWarnings(up0, down0, up1, down1 forward.Stats) []string {
	delta := func(f func(forward.Stats) uint64) uint64 { return f(up1) - f(up0) + f(down1) - f(down0) }
	var w []string
	if d := delta(func(s forward.Stats) uint64 { return s.PoolEmpty }); d > 0 {
		w = append(w, fmt.Sprintf("emulator packet pool exhausted: %d packets dropped outside the configured impairments", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.Oversize }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d packets larger than its buffers dropped outside the configured impairments", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.Malformed }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d malformed offload super-packets dropped", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.WriteErrors }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d packets refused by the TUN device", d))
	}
	return w
}

// Endpoint-side loss check of QUIC samples (endpointLoss).
const (
	// A QUIC sender's declared losses must exceed the packets dropped on
	// the way by more than max(endpointLossMin, endpointLossFraction × the
	// packets it sent) before the rest is put down to the receiver. Over a
	// link that does not reorder, and with a receiver that keeps up, the
	// excess is a few packets: lost MTU probes (quic-go counts them), and
	// over a lossy link packets received but acknowledged only in ACK
	// ranges that quic-go's receiver stopped reporting (it keeps 64), whose
	// number grows with the packets in flight; the fraction keeps large
	// transfers from being flagged for those. In runs stored on the
	// reference machine, QUIC samples over links that did not reorder
	// (loss of 1-5% without delay, delay of 10-50 ms each way without
	// loss) had excesses of at most 7 packets; over links with jitter,
	// which reorders and is not checked, up to 43; over links without any
	// impairment, where receivers could not keep up, up to 1,603 in
	// samples of 800 to 9,000 packets.
	endpointLossMin      = 10
	endpointLossFraction = 0.005
)

// outsideDrops returns, per direction (up, down), the packets lost between
// the sending and the receiving namespace outside the link's model: dropped
// from a TUN device's queue (dev, the sample's per-direction counts, valid
// when devOK), or by the forwarder (counters fw0 before and fw1 after the
// sample: pool exhausted, oversize, refused by the output device). It is
// model.NotMeasured for a direction when that is not known: the device
// counters could not be read, or the forwarder dropped malformed
// super-packets, whose wire packets it does not count.
func outsideDrops(devOK bool, dev [2]uint64, fw0, fw1 [2]forward.Stats) [2]int64 {
	out := [2]int64{model.NotMeasured, model.NotMeasured}
	if !devOK {
		return out
	}
	for i := range out {
		a, b := fw0[i], fw1[i]
		if b.Malformed != a.Malformed {
			continue
		}
		out[i] = int64(dev[i] + b.PoolEmpty - a.PoolEmpty + b.Oversize - a.Oversize + b.WriteErrors - a.WriteErrors)
	}
	return out
}

// endpointLoss compares, per direction of a QUIC sample (protocol h3 or
// quic), the packets the sending endpoint declared lost (the sum of
// PacketsLost over its connections' transport statistics: the client's for
// up, the server's for down) with the packets dropped on the way: by the
// link (loss model, queue, corruption, blackout, flush) and outside it
// (outside, per direction, as outsideDrops returns). A direction gets a
// warning when the declared losses exceed those drops by more than
// max(endpointLossMin, endpointLossFraction × the sender's packets sent):
// the rest were lost at the receiving end, whose quic-go discarded them
// (its queue of unprocessed packets full) or whose kernel did (the socket
// buffer full). A direction whose link reordered packets is not checked,
// since reordering makes QUIC declare losses that were none; nor one
// without the sender's statistics, with a count not measured, or with
// outside drops not known.
func endpointLoss(c *model.Cell, s *model.Sample, outside [2]int64) []string {
	if !model.IsQUIC(c.Protocol) {
		return nil
	}
	var w []string
	for i, d := range []struct {
		dir, sender, receiver string
		k                     emu.Counters
	}{{"up", "client", "server", s.LinkUp}, {"down", "server", "client", s.LinkDown}} {
		if d.k.Reordered > 0 || outside[i] < 0 {
			continue
		}
		var lost, sent int64
		conns, known := 0, true
		for _, t := range s.Transport {
			side := t.Side
			if side == "" {
				side = "client"
			}
			if t.Kind != "quic" || side != d.sender {
				continue
			}
			if t.PacketsLost < 0 || t.PacketsSent < 0 {
				known = false
				break
			}
			lost += t.PacketsLost
			sent += t.PacketsSent
			conns++
		}
		if !known || conns == 0 {
			continue
		}
		k := d.k
		dropped := int64(k.DropLoss+k.DropQueue+k.DropCorrupt+k.DropOff+k.DropFlush) + outside[i]
		if float64(lost-dropped) <= max(endpointLossMin, endpointLossFraction*float64(sent)) {
			continue
		}
		w = append(w, fmt.Sprintf("%s: the QUIC sender (%s) declared %d packets lost where the link dropped %d: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the %s could not keep up",
			d.dir, d.sender, lost, dropped, d.receiver))
	}
	return w
}

// udpDrops are the UDP receive-buffer drop counters of the client and the
// server namespace (netns.Testbed.UDPReceiveBufferErrors), indexed by
// netns.Side; ok is false for a side whose reading failed.
type udpDrops struct {
	n  [2]uint64
	ok [2]bool
}

// udpReceiveDrops reads both namespaces' UDP receive-buffer drop counters.
func (r *run) udpReceiveDrops() udpDrops {
	var u udpDrops
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		n, err := r.tb.UDPReceiveBufferErrors(s)
		u.n[s], u.ok[s] = n, err == nil
	}
	return u
}

// udpReceiveWarnings warns about every namespace whose kernel dropped UDP
// datagrams between readings a and b because the receiving socket's buffer
// was full; a side read in error either time gets no warning.
func udpReceiveWarnings(a, b udpDrops) []string {
	var w []string
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		if a.ok[s] && b.ok[s] && b.n[s] > a.n[s] {
			w = append(w, fmt.Sprintf("%s namespace: %d UDP datagrams dropped because the receiving socket's buffer was full (UdpRcvbufErrors)", s, b.n[s]-a.n[s]))
		}
	}
	return w
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
// between samples is left out.
type overheadMeter struct {
	now  func() time.Time // time.Now when nil
	from time.Time        // start of storing the previous sample
}

func (m *overheadMeter) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// start marks the start of the runner's work on a sample; it only counts
// for the first sample (afterwards the previous storing is the start).
func (m *overheadMeter) start() {
	if m.from.IsZero() {
		m.from = m.clock()
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
func (r *run) callAgent(ctx context.Context, req workload.Request) (*workload.Result, []model.Series, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, timeout+agentGrace)
	defer cancel()
	type out struct {
		res workload.Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		var o out
		o.err = r.agent.ctl.Call(actx, "run", req, &o.res)
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

// validity checks what the sample met against what was configured.
func validity(c *model.Cell, up, down spec.Link, s *model.Sample, res *workload.Result) []string {
	var w []string
	check := func(dir string, l spec.Link, k emu.Counters) {
		if k.DropQueue > 0 && !l.HasBottleneck() {
			pk, _ := l.QueueLimit()
			w = append(w, fmt.Sprintf("%s: %d packets dropped by the queue limit on a link without a rate limit: as in netem, packets in the delay line count against limit (%d packets); raise limit if these drops are not wanted", dir, k.DropQueue, pk))
		}
	}
	check("up", up, s.LinkUp)
	check("down", down, s.LinkDown)
	if m := lossAnomaly("up", up.Loss, s.LinkUp); m != "" {
		w = append(w, m)
	}
	if m := lossAnomaly("down", down.Loss, s.LinkDown); m != "" {
		w = append(w, m)
	}
	if c.Protocol != model.ProtoH3 && c.Protocol != model.ProtoQUIC && c.Client == model.ClientBuiltin {
		for i, t := range res.Transport {
			if t.Kind == "tcp" && t.CongestionAlgo != "" && c.CC != "" && t.CongestionAlgo != c.CC {
				w = append(w, fmt.Sprintf("connection %d used congestion control %s, not %s", i, t.CongestionAlgo, c.CC))
			}
		}
	}
	return w
}

// serverStatsWait bounds the wait for the server to see the sample's
// connections end.
const serverStatsWait = time.Second

// serverStats asks the server for its final statistics of conns.
func (r *run) serverStats(conns []endpoint.ConnRef) []model.TransportStats {
	r.srv.mu.Lock()
	replies, err := r.srv.ctl.ConnStats(serverStatsWait, conns...)
	r.srv.mu.Unlock()
	if err != nil {
		return nil
	}
	var out []model.TransportStats
	for _, rep := range replies {
		if rep.Stats != nil {
			st := *rep.Stats
			st.Side = "server"
			out = append(out, st)
		}
	}
	return out
}

// Loss fidelity check.
const (
	// lossCheckMinPackets is the least number of packets a direction must
	// carry in a sample before its loss count is checked.
	lossCheckMinPackets = 100
	// lossCheckAlpha: a loss count outside the central 1-lossCheckAlpha
	// (99.9%) interval of the binomial distribution is flagged, so about
	// one direction in a thousand is flagged by chance alone.
	lossCheckAlpha = 0.001
)

// lossAnomaly checks the packets the loss model dropped in one direction
// of a sample (k.DropLoss) against the configured loss: with independent
// losses of probability p over n packets, the count is binomial(n, p). A
// count outside the central 99.9% interval means that the emulator did not
// lose what was asked; the returned warning says so ("" if the count is
// plausible, if fewer than lossCheckMinPackets packets were decided on, or
// if the loss model is bursty, whose counts vary more than a binomial's).
func lossAnomaly(dir string, l spec.Loss, k emu.Counters) string {
	p, ok := l.LongRun()
	if !ok || k.DropOff > k.PacketsIn {
		return ""
	}
	// The loss model decides every packet offered to the link except those
	// dropped by a blackout first.
	n := k.PacketsIn - k.DropOff
	if n < lossCheckMinPackets {
		return ""
	}
	lo, hi := binomialInterval(n, p, lossCheckAlpha)
	if k.DropLoss >= lo && k.DropLoss <= hi {
		return ""
	}
	return fmt.Sprintf("%s: the loss model dropped %d of %d packets (%.2f%%), outside the %g%% binomial interval [%d, %d] of the configured loss %g%%: the link did not lose what was asked",
		dir, k.DropLoss, n, 100*float64(k.DropLoss)/float64(n), 100*(1-lossCheckAlpha), lo, hi, 100*p)
}

// binomialInterval returns the central 1-alpha interval [lo, hi] of a
// binomial(n, p) count: lo is the smallest k with P(X <= k) >= alpha/2, hi
// the smallest k with P(X <= k) >= 1-alpha/2.
func binomialInterval(n uint64, p, alpha float64) (lo, hi uint64) {
	switch {
	case p <= 0:
		return 0, 0
	case p >= 1:
		return n, n
	}
	b := distuv.Binomial{N: float64(n), P: p}
	quantile := func(q float64) uint64 {
		a, z := uint64(0), n // the answer is in [a, z]
		for a < z {
			m := a + (z-a)/2
			if b.CDF(float64(m)) >= q {
				z = m
			} else {
				a = m + 1
			}
		}
		return a
	}
	return quantile(alpha / 2), quantile(1 - alpha/2)
}

package plan

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/emu/trace"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// The estimate of a run's duration is an order-of-magnitude model, not a
// simulator: a sample costs its round trips, its bytes at the path's
// throughput and its fixed costs. docs/plan-format.md ("Estimated
// duration") describes it and how it compares with real runs. Its
// constants follow.
const (
	// estBaseRTT is the round-trip time of the emulated path when the link
	// specs add no delay (veth pairs and the emulator).
	estBaseRTT = 200 * time.Microsecond

	// estCapTCP and estCapQUIC are the goodput one connection reaches on
	// the reference machine (2 cores shared by client, server and
	// emulator) over an unlimited link, in bit/s: kernel TCP with TLS
	// moves 2.6-7 Gbit/s, quic-go about 1.2 Gbit/s and less as the RTT
	// grows (docs/performance.md, "Endpoints"). The order of magnitude of
	// this machine, not a property of the protocols.
	estCapTCP  = 3e9
	estCapQUIC = 1e9

	// estMSS is the TCP payload of one full packet, the MSS of the Mathis
	// et al. bound; estWireEfficiency is the share of a rate-limited link's
	// bits that carry payload (1448 of the 1500 bytes of a packet).
	estMSS            = 1448
	estWireEfficiency = estMSS / 1500.0

	// estMathisC is the constant of the Mathis et al. bound on the goodput
	// of a loss-limited connection: C·MSS/(RTT·√p), C = √(3/2) ≈ 1.22.
	estMathisC = 1.22
	// estCubicBeta and estCubicAlpha are the window's decrease factor on a
	// loss and its increase per round trip between losses: CUBIC's
	// (RFC 9438) in its Reno-friendly region, where the paths of the
	// built-in plans keep it. Their steady state is the Mathis et al.
	// bound: √(α(1+β)/(2(1-β)p)) = 1.22/√p packets per round trip.
	estCubicBeta  = 0.7
	estCubicAlpha = 3 * (1 - estCubicBeta) / (1 + estCubicBeta)
	// estSteadyLosses is after how many losses a lossy transfer is taken
	// to be in its steady state (the window within 0.7^20 of it), and
	// estMaxRounds bounds the round trips followed one by one.
	estSteadyLosses = 20
	estMaxRounds    = 100000
	// estMinLossRTT is the least RTT the bound is given: on a path with
	// almost no delay, recovering from losses is paced by the stacks'
	// timers and processing rather than by the RTT. Fitted to the
	// transfers of the degraded-networks run at 2% loss and 0.2 ms RTT
	// (3.4-10 MB at 200-400 Mbit/s).
	estMinLossRTT = 500 * time.Microsecond

	// estIWTCP and estIWQUIC are the initial congestion windows in bytes:
	// Linux's 10 segments (RFC 6928) and quic-go's 32 packets of about
	// 1250 bytes. A transfer spends about log2(size/IW + 1) round trips in
	// slow start until its window covers the path's bandwidth-delay
	// product.
	estIWTCP  = 10 * estMSS
	estIWQUIC = 32 * 1250

	// estTCPSynRTO is the cost of losing a TCP connection's SYN or SYN-ACK
	// (Linux's initial retransmission timeout); estTCPMinRTO is Linux's
	// minimum RTO, added to the RTT for a loss later in a connection.
	estTCPSynRTO = time.Second
	estTCPMinRTO = 200 * time.Millisecond
	// estQUICInitialPTO is the cost of losing a QUIC connection's first
	// packets (quic-go: twice its 100 ms initial RTT); a later loss costs
	// a probe timeout of about 2·RTT plus the peer's 25 ms maximum
	// acknowledgement delay (estQUICMaxAckDelay).
	estQUICInitialPTO  = 200 * time.Millisecond
	estQUICMaxAckDelay = 25 * time.Millisecond
	// estQUICServerFlight is the packets of a QUIC server's first flight
	// (Initial and Handshake packets carrying the certificate chain), each
	// of which a loss on the server->client direction may hit.
	estQUICServerFlight = 3

	// estH1Connections is how many connections HTTP/1.1 (and the raw tcp
	// transport) opens at most for parallel requests, as browsers do.
	estH1Connections = 6

	// estRunnerOverhead is the runner's own work per sample (link reset,
	// control round trips, counters, storing): p50 3 ms, p95 5 ms
	// (docs/performance.md, "Runner"). The drain, one one-way delay of the
	// client->server direction, comes on top for the built-in client.
	estRunnerOverhead = 3 * time.Millisecond

	// What a sample of another client than the built-in one costs beyond
	// its requests (a program's or a browser's start and teardown), the
	// browser's own work inside a page load and an audit's work after it
	// are its stack's (peers.Client's Overhead, Work and AfterLoad in
	// peers/NAME/stack.yaml), measured there.

	// estTraceFallbackBps is the rate assumed for a trace file that cannot
	// be read (a plan checked with Parse, whose relative paths are not
	// resolved, or a file since removed): 12 Mbit/s, the trace "1" of one
	// packet per millisecond.
	estTraceFallbackBps = 12e6

	// estSiteFallbackBytes and estSiteFallbackRequests stand for a site
	// directory that cannot be read: about the generated sites' mean.
	estSiteFallbackBytes    = 2_000_000
	estSiteFallbackRequests = 38
)

// Estimate is how long a plan's run is expected to take on the reference
// machine (a 2-core VM, see docs/performance.md): an order of magnitude,
// from the cells' link specs, tests and parameters.
type Estimate struct {
	Total time.Duration  // every sample of every cell, warm-ups included, one at a time
	Cells []CellEstimate // one per cell, in Expand order

	// Parallel is the duration of the run with up to ParallelN testbeds
	// at once (EstimateWith, EstimateParallel); Estimate leaves it at
	// Total with ParallelN 1, a run of one testbed.
	Parallel  time.Duration
	ParallelN int
}

// CellEstimate is the estimate of one cell.
type CellEstimate struct {
	Key     string        // the cell's key
	Sample  time.Duration // one sample (a warm-up costs the same), overheads included
	Samples int           // samples the cell takes: its iterations plus its warm-up
}

// Total is the time of all the cell's samples.
func (c CellEstimate) Total() time.Duration { return mulSat(c.Sample, c.Samples) }

// estMax is the largest estimate: sums and products saturate there rather
// than overflow (a plan may hold 100,000 cells of 100,000 iterations).
const estMax = time.Duration(math.MaxInt64)

func mulSat(d time.Duration, n int) time.Duration {
	if n <= 0 || d <= 0 {
		return 0
	}
	if d > estMax/time.Duration(n) {
		return estMax
	}
	return d * time.Duration(n)
}

func addSat(a, b time.Duration) time.Duration {
	if b > estMax-a {
		return estMax
	}
	return a + b
}

// sum adds non-negative durations, saturating at estMax.
func sum(ds ...time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t = addSat(t, d)
	}
	return t
}

// seconds converts a float number of seconds into a Duration, saturating
// at estMax (a transfer of 100 GB at a few bit/s).
func seconds(s float64) time.Duration {
	if ns := s * float64(time.Second); ns < float64(estMax) {
		return time.Duration(ns)
	}
	return estMax
}

// Estimate estimates the duration of a full run of the plan: the sum over
// its cells of one sample's estimate (EstimateCell) times the cell's
// iterations plus its warm-up. The error names the first cell that cannot
// be estimated (a link spec or parameter that does not parse, which a plan
// from Parse or Load never has).
func (p *Plan) Estimate() (Estimate, error) {
	if p == nil || p.cells == nil {
		return Estimate{}, fmt.Errorf("plan: Estimate on a plan that was not parsed")
	}
	var e Estimate
	for i := range p.cells {
		c := &p.cells[i]
		d, err := p.EstimateCell(c)
		if err != nil {
			return Estimate{}, err
		}
		n := c.Iterations
		if c.Warmup {
			n++
		}
		ce := CellEstimate{Key: c.Key, Sample: d, Samples: n}
		e.Cells = append(e.Cells, ce)
		e.Total = addSat(e.Total, ce.Total())
	}
	e.Parallel, e.ParallelN = e.Total, 1
	return e, nil
}

// EstimateCell estimates one sample of a cell of the plan (a cell from
// Expand, or one stored by a run of this plan): EstimateSample with the
// cell's timeout.
func (p *Plan) EstimateCell(c *model.Cell) (time.Duration, error) {
	return EstimateSample(c, p.TimeoutFor(c))
}

// EstimateSample estimates what one sample of cell c costs the runner on
// the reference machine: the client's part (the test's preparation and its
// measured part, capped at timeout when timeout > 0) plus the runner's
// overhead and, for the built-in client, the drain of one one-way delay.
// See docs/plan-format.md, "Estimated duration", for the model.
func EstimateSample(c *model.Cell, timeout time.Duration) (time.Duration, error) {
	prm, err := StoredCellParams(c)
	if err != nil {
		return 0, err
	}
	return EstimateParams(c, prm, timeout)
}

// EstimateParams is EstimateSample of cell c with its test parameters
// already decoded (CellParams): what the runner hands the client agent.
func EstimateParams(c *model.Cell, p Params, timeout time.Duration) (time.Duration, error) {
	d, _, err := estimateParams(c, p, timeout)
	return d, err
}

// estimateParams is EstimateParams, with the work the estimated sample
// asks of the machine.
func estimateParams(c *model.Cell, p Params, timeout time.Duration) (time.Duration, estWork, error) {
	up, err := spec.Parse(c.LinkUp)
	if err != nil {
		return 0, estWork{}, fmt.Errorf("cell %s: link up %q: %w", c.Key, c.LinkUp, err)
	}
	down, err := spec.Parse(c.LinkDown)
	if err != nil {
		return 0, estWork{}, fmt.Errorf("cell %s: link down %q: %w", c.Key, c.LinkDown, err)
	}
	t := lookupTest(c.Test)
	if t == nil {
		return 0, estWork{}, fmt.Errorf("cell %s: unknown test %q", c.Key, c.Test)
	}
	st, err := stackOf(c.Protocol)
	if err != nil {
		return 0, estWork{}, fmt.Errorf("cell %s: %w", c.Key, err)
	}
	m := estModel{st: st, up: linkFigures(up), down: linkFigures(down)}
	m.rtt = up.Delay + down.Delay + estBaseRTT
	var cl *peers.Client
	if st, ok := peers.ClientStack(c.Client); ok && c.Client != model.ClientBuiltin {
		cl = st.Client
	}
	inBrowser := cl != nil && (cl.Kind == peers.KindBrowser || cl.Kind == peers.KindAudit)
	if inBrowser {
		m.pageWork = time.Duration(cl.Work)
	}

	client := t.estimate(&m, p, inBrowser)
	if cl != nil {
		client = addSat(client, time.Duration(cl.AfterLoad))
	}
	if timeout > 0 && client > timeout {
		client = timeout
	}
	total := addSat(client, estRunnerOverhead)
	if c.Test != TestFairness {
		// Competing flows run their lead time before the measured part
		// (the fairness test's flows all start together instead).
		if sp, err := Competing(c); err == nil && len(sp.Flows) > 0 {
			total = addSat(total, sp.Lead)
		}
	}
	switch {
	case inBrowser:
		total = addSat(total, time.Duration(cl.Overhead))
	case cl != nil:
		total = addSat(total, time.Duration(cl.Overhead)+up.Delay)
	default:
		total = addSat(total, up.Delay) // the drain: the client's close reaches the server
	}
	return total, m.work, nil
}

// stack is what the estimate needs to know of a protocol's transport.
type stack struct {
	quic        bool
	rounds      int     // round trips of a fresh connection's handshake before the request
	maxConns    int     // connections for parallel requests (1: streams multiplexed on one)
	capBps      float64 // estCapTCP or estCapQUIC
	initialWind float64 // initial congestion window in bytes
}

func stackOf(proto string) (stack, error) {
	tcp := stack{rounds: 2, maxConns: 1, capBps: estCapTCP, initialWind: estIWTCP} // TCP, then TLS 1.3
	switch proto {
	case model.ProtoH2:
		return tcp, nil
	case model.ProtoH1, model.ProtoTCP:
		tcp.maxConns = estH1Connections
		return tcp, nil
	case model.ProtoH1C:
		tcp.rounds, tcp.maxConns = 1, estH1Connections // no TLS
		return tcp, nil
	case model.ProtoH3, model.ProtoQUIC:
		return stack{quic: true, rounds: 1, maxConns: 1, capBps: estCapQUIC, initialWind: estIWQUIC}, nil
	}
	return stack{}, fmt.Errorf("unknown protocol %q", proto)
}

// direction holds one direction's figures: its bottleneck rate in bit/s
// (0 = none), the share of time it is on (onoff), its long-run loss
// probability and its queue's limit in packets.
type direction struct {
	rate  float64
	duty  float64
	loss  float64
	queue float64
}

func linkFigures(l spec.Link) direction {
	d := direction{rate: float64(l.Rate), duty: 1}
	pk, by := l.QueueLimit()
	d.queue = float64(pk)
	if q := float64(by) / 1500; by > 0 && (pk == 0 || q < d.queue) {
		d.queue = q
	}
	if l.Trace != "" {
		tr := traceMeanBps(l.Trace)
		if d.rate == 0 || tr < d.rate {
			d.rate = tr
		}
	}
	if l.On > 0 || l.Off > 0 {
		d.duty = float64(l.On) / float64(l.On+l.Off)
	}
	d.loss, _ = l.Loss.LongRun()
	return d
}

// traceMeans caches the mean rate of trace files, by path, size and
// modification time: a plan's cells name the same few files many times.
var traceMeans sync.Map // string -> float64

func traceMeanBps(path string) float64 {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() {
		return estTraceFallbackBps
	}
	key := path + "\x00" + strconv.FormatInt(st.Size(), 10) + "\x00" + strconv.FormatInt(st.ModTime().UnixNano(), 10)
	if v, ok := traceMeans.Load(key); ok {
		return v.(float64)
	}
	v := float64(estTraceFallbackBps)
	if t, err := trace.Load(path); err == nil {
		v = float64(t.MeanBps())
	}
	traceMeans.Store(key, v)
	return v
}

// estModel estimates the client's part of one sample over one path.
type estModel struct {
	st       stack
	up, down direction
	rtt      time.Duration
	work     estWork       // what the estimated sample asks of the machine (CellLoad)
	pageWork time.Duration // a browser's own work inside a page load (its stack's Work)
}

// estWork counts the machine's work in an estimated sample: connections
// set up, requests made and bytes moved (CellLoad turns it into CPU).
type estWork struct {
	conns, requests int
	bytes           int64
}

// rto is what a lost packet costs once a connection has an RTT sample.
func (m *estModel) rto() time.Duration {
	if m.st.quic {
		return 2*m.rtt + estQUICMaxAckDelay
	}
	return estTCPMinRTO + m.rtt
}

// lossCost is the expected cost of losses in one round trip that sends a
// packet each way, each lost with its direction's probability and
// recovered after penalty.
func (m *estModel) lossCost(penalty time.Duration) time.Duration {
	return time.Duration((m.up.loss + m.down.loss) * float64(penalty))
}

// exchange is one request-response round trip on an open connection.
func (m *estModel) exchange() time.Duration {
	m.work.requests++
	return m.rtt + m.lossCost(m.rto())
}

// handshake is a fresh connection's set-up before its first request: a
// loss in the first round trip costs the initial timeout (TCP's SYN or
// SYN-ACK; QUIC's first flights, the server's of estQUICServerFlight
// packets), in the later ones (TLS over TCP) an ordinary RTO.
func (m *estModel) handshake() time.Duration {
	m.work.conns++
	if m.st.quic {
		p := m.up.loss + estQUICServerFlight*m.down.loss
		return m.rtt + time.Duration(p*float64(estQUICInitialPTO))
	}
	return m.rtt + m.lossCost(estTCPSynRTO) + time.Duration(m.st.rounds-1)*m.exchange()
}

// throughput is the goodput in bit/s of the direction d without loss: the
// bottleneck rate (its payload share), the machine's cap, times the on
// share of an onoff link.
func (m *estModel) throughput(d direction) float64 {
	t := m.st.capBps
	if d.rate > 0 {
		t = math.Min(t, d.rate*estWireEfficiency)
	}
	return t * d.duty
}

// slowStartRounds is the number of round trips slow start needs to deliver
// bytes from a window of iw: log2(bytes/iw + 1), rounded up.
func slowStartRounds(bytes, iw float64) int {
	if bytes <= 0 {
		return 0
	}
	return int(math.Ceil(math.Log2(bytes/iw + 1)))
}

// transfer is the time to move bytes over direction d on conns
// connections once requested, beyond the request's round trip. Without
// loss: the bytes at the throughput, plus the round trips slow start adds
// (bounded by the rounds its window needs to cover the bandwidth-delay
// product). With loss: lossyTransfer.
func (m *estModel) transfer(bytes int64, d direction, conns int) time.Duration {
	m.work.bytes += max(bytes, 0)
	if bytes <= 0 {
		return 0
	}
	conns = max(conns, 1)
	t := m.throughput(d)
	if d.loss > 0 {
		return m.lossyTransfer(bytes, d, conns, t)
	}
	per := float64(bytes) / float64(conns)
	bdp := t / float64(conns) * m.rtt.Seconds() / 8
	rounds := min(slowStartRounds(per, m.st.initialWind), slowStartRounds(bdp, m.st.initialWind))
	return addSat(seconds(float64(bytes)*8/t), time.Duration(max(rounds-1, 0))*m.rtt)
}

// lossyTransfer is a transfer over a lossy direction: each connection's
// window, in expected values, one round trip at a time. It doubles from
// the initial window (slow start) until the first loss, which comes after
// 1/p packets; every further 1/p packets a loss multiplies it by
// estCubicBeta, and between losses it grows by estCubicAlpha packets per
// round trip. A round trip carries the window, at most the connection's
// share of the bandwidth-delay product; the window cannot outgrow that
// share plus the bottleneck queue. That converges to the Mathis et al.
// bound, estMathisC·MSS/(RTT·√p), which finishes the transfer once
// estSteadyLosses losses have passed; before, it is faster, for the
// window slow start reached. The time is never less than the bytes at the
// throughput without loss.
func (m *estModel) lossyTransfer(bytes int64, d direction, conns int, t float64) time.Duration {
	rtt := max(m.rtt, estMinLossRTT)
	pkts := math.Ceil(float64(bytes) / float64(conns) / estMSS)      // per connection
	perRound := math.Max(1, t/float64(conns)*rtt.Seconds()/8/estMSS) // packets per round trip
	wmax := perRound + d.queue/float64(conns)                        // beyond, the queue overflows
	every := 1 / d.loss
	w, next, sent, rounds := m.st.initialWind/estMSS, every, 0.0, 0.0
	slow := true
	for losses := 0; sent < pkts; {
		if losses >= estSteadyLosses || rounds >= estMaxRounds {
			steady := math.Min(perRound, estMathisC/math.Sqrt(d.loss))
			if losses < estSteadyLosses {
				steady = math.Min(perRound, w) // no loss in sight: the current window
			}
			rounds += math.Ceil((pkts - sent) / steady)
			break
		}
		sent += math.Min(w, perRound)
		rounds++
		switch {
		case sent >= next:
			next = (math.Floor(sent/every) + 1) * every
			w = math.Max(w*estCubicBeta, 1)
			slow = false
			losses++
		case slow:
			w = math.Min(2*w, wmax)
		default:
			w = math.Min(w+estCubicAlpha, wmax)
		}
	}
	// The first round trip is the request's.
	return max(seconds((rounds-1)*rtt.Seconds()), seconds(float64(bytes)*8/t))
}

// parallel returns the connections n parallel requests use and the round
// trips of requests each connection makes in turn: all on one connection
// in one round for a multiplexing protocol, else one request at a time
// on each of up to estH1Connections connections.
func (m *estModel) parallel(n int) (conns, rounds int) {
	if n <= 0 {
		return 1, 0
	}
	if m.st.maxConns <= 1 {
		return 1, 1
	}
	conns = min(n, m.st.maxConns)
	return conns, (n + conns - 1) / conns
}

// page is the time of a page load of a document and n objects of total
// bytes, from the first connection's start (cold) or over an open
// connection (warm): the document's round trip, the further connections
// HTTP/1.1 opens, the objects' requests (one round trip per object a
// connection carries in turn) and their bytes.
func (m *estModel) page(n int, bytes int64, warm bool) time.Duration {
	conns, rounds := m.parallel(n)
	var d time.Duration
	if !warm {
		d = m.handshake()
	}
	d = addSat(d, m.exchange()) // the document
	if n == 0 {
		return d
	}
	if conns > 1 {
		d = addSat(d, m.handshake()) // the further connections, opened in parallel
		m.work.conns += conns - 2
	}
	m.work.requests += n - 1 // the objects' requests share the rounds' exchange
	return sum(d, mulSat(m.exchange(), rounds), m.transfer(bytes, m.down, conns))
}

// fetchDown is a fresh connection's request of a response of p.Size bytes
// (the ttfb, download and cpu tests).
func (m *estModel) fetchDown(p Params, _ bool) time.Duration {
	return sum(m.handshake(), m.exchange(), m.transfer(p.Size, m.down, 1))
}

// pageLoad is the client's part of a page or site sample: the load of a
// document and n objects of total bytes, cold or warm, by a browser or by
// the built-in client.
func (m *estModel) pageLoad(n int, bytes int64, warm, inBrowser bool) time.Duration {
	if inBrowser {
		load := addSat(m.page(n, bytes, false), m.pageWork)
		if warm {
			// A priming load of the same page, then the measured one
			// over the connections it left open.
			return sum(load, m.page(n, bytes, true), m.pageWork)
		}
		return load
	}
	if warm {
		// One connection and an unmeasured /echo, then the load on it.
		return sum(m.handshake(), m.exchange(), m.page(n, bytes, true))
	}
	return m.page(n, bytes, false)
}

// siteShape returns the requests (document included) and total bytes of a
// site parameter: a generated site's shape, or a directory's files.
func siteShape(site string) (requests int, bytes int64) {
	if s, ok := sites.Lookup(site); ok {
		return s.Requests, s.Bytes
	}
	err := filepath.WalkDir(site, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			requests++
			bytes += info.Size()
		}
		return nil
	})
	if err != nil || requests == 0 {
		return estSiteFallbackRequests, estSiteFallbackBytes
	}
	return requests, bytes
}

// FormatEstimate prints an estimated duration to the precision it has:
// seconds under 10 minutes ("45s", "1m40s"), minutes under 10 hours
// ("3h10m", "25m"), hours under 3 days ("21h"), then days and hours
// ("4d6h").
func FormatEstimate(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return "<1s"
	case d < 10*time.Minute:
		s := int64(d.Round(time.Second) / time.Second)
		if s < 60 {
			return fmt.Sprintf("%ds", s)
		}
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case d < 10*time.Hour:
		m := int64(d.Round(time.Minute) / time.Minute)
		switch {
		case m < 60:
			return fmt.Sprintf("%dm", m)
		case m%60 == 0:
			return fmt.Sprintf("%dh", m/60)
		}
		return fmt.Sprintf("%dh%dm", m/60, m%60)
	case d < 72*time.Hour:
		return fmt.Sprintf("%dh", int64(d.Round(time.Hour)/time.Hour))
	}
	h := int64(d.Round(time.Hour) / time.Hour)
	if h%24 == 0 {
		return fmt.Sprintf("%dd", h/24)
	}
	return fmt.Sprintf("%dd%dh", h/24, h%24)
}

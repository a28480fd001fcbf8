// Package model holds the data types shared by quicbench's packages: what a
// run, a cell and a sample are, and the per-sample measurements (negotiated
// protocol, transport statistics, CPU cost, link counters, timelines) that
// the endpoints produce, the store keeps and the report reads; and the
// spellings they share: protocol, client and congestion control names, and
// byte sizes (ParseSize, FormatSize).
//
// It is a leaf package: it imports only the standard library and emu (for
// the emulator's counters), so every other package may depend on it.
package model

import (
	"strings"
	"time"

	"github.com/quicbench/quicbench/emu"
)

// Protocol names as used in plans, the CLI and the store.
const (
	ProtoH1   = "h1"   // HTTP/1.1 over TLS 1.3 over TCP
	ProtoH1C  = "h1c"  // HTTP/1.1 in cleartext over TCP
	ProtoH2   = "h2"   // HTTP/2 over TLS 1.3 over TCP
	ProtoH3   = "h3"   // HTTP/3 over QUIC
	ProtoTCP  = "tcp"  // raw request/response over TLS 1.3 over TCP (no HTTP)
	ProtoQUIC = "quic" // raw request/response over one QUIC stream (no HTTP)
)

// Protocols lists every protocol quicbench knows, in display order.
var Protocols = []string{ProtoH1, ProtoH1C, ProtoH2, ProtoH3, ProtoTCP, ProtoQUIC}

// IsQUIC reports whether proto runs over QUIC (as opposed to TCP).
func IsQUIC(proto string) bool { return proto == ProtoH3 || proto == ProtoQUIC }

// DefaultCC is the congestion control used where none is chosen.
const DefaultCC = "cubic"

// CongestionControls lists the congestion control algorithms quicbench
// accepts (in plans, on the command line and for a testbed), DefaultCC
// first. TCP connections always run the plan's (the kernel's algorithm of
// that name); a QUIC stack runs it when it can choose, else its own (its
// stack's CC in package peers says which).
var CongestionControls = []string{DefaultCC, "bbr", "reno"}

// CCName returns the plan's name of a congestion control algorithm that a
// stack reports under a name of its own: quiche's "bbr2_gcongestion" and
// "bbr2" are its BBR (plan name "bbr"), "newreno" is "reno". Other names
// are returned as they are, lower-cased.
func CCName(reported string) string {
	switch s := strings.ToLower(reported); s {
	case "bbr2", "bbr2_gcongestion", "bbrv2", "bbrv1":
		return "bbr"
	case "newreno", "new_reno":
		return "reno"
	default:
		return s
	}
}

// CCLabel names a congestion control algorithm for readers: "Cubic",
// "BBR", "NewReno" (what the kernel's "reno" and the QUIC stacks' Reno
// are: RFC 6582 NewReno).
func CCLabel(name string) string {
	switch name {
	case "cubic":
		return "Cubic"
	case "bbr":
		return "BBR"
	case "reno":
		return "NewReno"
	}
	return name
}

// The names of quicbench's own client and server: the default of every
// cell. Every other implementation (aioquic, Caddy, the browsers...) is a
// stack of the registry (package peers), known by its name there.
const (
	ClientBuiltin   = "builtin"   // quicbench's own Go client (net/http, quic-go)
	ServerQuicbench = "quicbench" // quicbench's own server (net/http, quic-go)
)

// Status is the outcome of one sample.
type Status string

// Sample outcomes. Only StatusOK samples enter the statistics; the others are
// stored with their cause and counted.
const (
	StatusOK      Status = "ok"      // measured and valid
	StatusFailed  Status = "failed"  // error or timeout; Error says which
	StatusInvalid Status = "invalid" // measured, but not what was asked (e.g. protocol mismatch)
)

// Run is one execution of a plan.
type Run struct {
	ID       int64
	PlanName string
	PlanText string // the plan as YAML, exactly as run
	PlanHash string // hex SHA-256 of the canonical plan; resume refuses a different one
	Seed     uint64
	Started  time.Time
	Finished time.Time // zero while running or when interrupted
	Status   string    // "running", "complete", "interrupted"
	Env      Environment
}

// Environment records the software and machine a run was taken on.
type Environment struct {
	Version       string            // quicbench version
	Commit        string            // VCS revision quicbench was built from
	GoVersion     string            // runtime.Version()
	QuicGoVersion string            // from the build info
	Kernel        string            // uname -r
	CPUModel      string            // /proc/cpuinfo "model name"
	CPUs          int               // runtime.NumCPU()
	Hostname      string            // os.Hostname
	CCClient      string            // TCP congestion control in the client namespace
	CCServer      string            // TCP congestion control in the server namespace
	Sysctls       map[string]string // socket buffer and other settings applied per namespace
	// Peers are the versions of the third-party programs that took the
	// run's samples, by name ("aioquic", "caddy", "chromium", "firefox"...),
	// e.g. "aioquic 1.7.2". Empty when only quicbench's own client and
	// server ran.
	Peers map[string]string
}

// Factor is one named coordinate of a cell: a grid dimension of its scenario
// (rate, delay, loss...) or a parameter of its test (size, objects...).
type Factor struct {
	Name  string
	Value string
}

// Cell is one measured combination: scenario x test x parameters x protocol x
// client x congestion control. A cell collects Iterations samples (plus a
// warm-up sample when the plan asks for one).
type Cell struct {
	ID             int64
	Key            string   // stable identity within a run, e.g. "loss-2/download/size=1MB/h3/builtin/cubic" ("/SERVER" appended for a server other than quicbench's)
	Group          string   // Key without the protocol: cells of one group are compared with each other
	Scenario       string   // scenario name from the plan
	LinkUp         string   // link spec client->server (netem grammar), "" for none
	LinkDown       string   // link spec server->client
	Test           string   // latency, ttfb, handshake, download, upload, multiplex, stream, page, site, cpu
	Factors        []Factor // grid coordinates and test parameters, in plan order
	Protocol       string   // one of Protocols
	Client         string   // ClientBuiltin or a client of the registry of stacks (package peers)
	Server         string   // ServerQuicbench or a server of the registry; ServerQuicbench unless the plan chose another
	CC             string   // the plan's congestion control: cubic, bbr, reno (TCP always; QUIC where the stack can choose)
	Metric         string   // name of the primary metric (a key of Sample.Metrics)
	Unit           string   // unit of the primary metric, e.g. "ms", "Mbit/s"
	HigherIsBetter bool     // true for goodput; false for times
	Iterations     int      // counted samples wanted (excluding warm-up)
	Warmup         bool     // whether one uncounted warm-up sample precedes them
}

// ServerImpl returns the cell's server implementation: Server, or
// ServerQuicbench for a cell made without one (by a caller, or a store,
// that predates servers).
func (c *Cell) ServerImpl() string {
	if c.Server == "" {
		return ServerQuicbench
	}
	return c.Server
}

// Factor returns the value of the named factor and whether it exists.
func (c *Cell) Factor(name string) (string, bool) {
	for _, f := range c.Factors {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// Negotiated is what a connection really negotiated, as seen by the client.
type Negotiated struct {
	ALPN        string // "http/1.1", "h2", "h3", "qb-raw"... ("" for cleartext)
	HTTPVersion string // "HTTP/1.1", "HTTP/2.0", "HTTP/3.0", "" for raw transports
	TLSVersion  string // "TLS 1.3", "" for cleartext
	Cipher      string // e.g. "TLS_AES_128_GCM_SHA256"
	QUICVersion string // e.g. "v1", "" for TCP
	Resumed     bool   // TLS session resumption happened
	ZeroRTT     bool   // 0-RTT (or TLS early data) was accepted by the server
}

// TransportStats are the final transport-level statistics of one connection:
// TCP_INFO for TCP, quic-go's connection tracing for QUIC. Fields that a
// transport does not provide are left zero; see docs/metrics.md.
type TransportStats struct {
	Kind               string  // "tcp" or "quic"
	Side               string  // whose view: "client" or "server" (the sender of a download); "" = client
	CongestionAlgo     string  // TCP: the socket's algorithm as the kernel reports it ("cubic", "bbr", "reno") / QUIC: the implementation's (quic-go: "reno")
	SmoothedRTTms      float64 // TCP tcpi_rtt / QUIC smoothed_rtt
	RTTVarms           float64 // TCP tcpi_rttvar / QUIC rtt variance
	MinRTTms           float64 // TCP tcpi_min_rtt / QUIC min_rtt
	CwndBytes          int64   // TCP snd_cwnd*snd_mss / QUIC congestion window
	SsthreshBytes      int64   // TCP snd_ssthresh*snd_mss (0 when "infinite") / QUIC: 0 (not exposed)
	PacketsSent        int64   // TCP segs_out / QUIC packets sent
	PacketsLost        int64   // TCP lost (tcpi_lost at end) / QUIC packets declared lost
	Retransmits        int64   // TCP tcpi_total_retrans (segments retransmitted) / QUIC packets declared lost, MTU probes excluded (their frames were sent again)
	BytesRetransmitted int64   // TCP bytes_retrans / QUIC bytes in lost packets
	DeliveryRateBps    int64   // TCP tcpi_delivery_rate*8 / QUIC: 0
	CongestionEvents   int64   // QUIC congestion state entries into "recovery" (loss-triggered window reductions) / TCP: 0
	PTOCount           int64   // QUIC probe timeouts / TCP tcpi_total_rto: retransmission timeouts over the connection's life (kernel >= 6.7; 0 on older kernels)
	// CongestionStateChanges counts the QUIC sender's congestion state
	// changes between slow start, congestion avoidance, recovery and
	// application limited (qlog recovery:congestion_state_updated events
	// after the initial one announcing slow start) / TCP: 0.
	CongestionStateChanges int64
}

// NotMeasured marks a TransportStats count that the connection's stack did
// not report: QUIC's PTOCount, CongestionEvents and CongestionStateChanges
// without quic-go's event tracing. Readers show it as missing, never as 0.
const NotMeasured = -1

// CPUUsage is the CPU time the client and server processes spent during one
// sample, from getrusage in each process.
type CPUUsage struct {
	ClientUser time.Duration
	ClientSys  time.Duration
	ServerUser time.Duration
	ServerSys  time.Duration
}

// Total is the summed CPU time of both processes.
func (c CPUUsage) Total() time.Duration {
	return c.ClientUser + c.ClientSys + c.ServerUser + c.ServerSys
}

// Point is one point of a timeline: T nanoseconds from the start of the
// sample, and a value whose meaning the Series kind gives.
type Point struct {
	T int64
	V float64
}

// Series kinds.
const (
	SeriesChunks    = "chunks"     // V = bytes in a received chunk, Label = stream/request id
	SeriesHOL       = "hol"        // V = bytes received in the fixed bin starting at T, Label = stream id
	SeriesCPUClient = "cpu_client" // V = client CPU utilisation (1.0 = one core) in the bin starting at T
	SeriesCPUServer = "cpu_server" // V = server CPU utilisation in the bin starting at T
	SeriesInterval  = "interval"   // V = inter-arrival time in ms of the chunk arriving at T (stream test)
)

// Series is one timeline of a sample.
type Series struct {
	Kind   string
	Label  string
	Points []Point
}

// Resource is one resource of a page load: its protocol and timings in
// nanoseconds from the start of the sample (navigation start for a browser).
type Resource struct {
	Name     string // URL path
	Protocol string // as reported: "http/1.1", "h2", "h3"
	Start    int64
	TTFB     int64
	End      int64
	Bytes    int64
}

// Sample is one measurement of one cell.
type Sample struct {
	ID        int64
	CellID    int64
	Iteration int    // 0-based counted iteration; -1 for the warm-up sample
	Warmup    bool   // warm-up samples are stored but never counted
	Order     int    // position of this protocol within its iteration's shuffled order
	Seed      uint64 // emulator seed: equal for every protocol of the same iteration
	Started   time.Time
	Wall      time.Duration // wall time of the measured part
	Overhead  time.Duration // everything around the measured part (setup, reset, bookkeeping)
	// Drain is the part of Overhead spent waiting, after the measured part,
	// for the sample's connections to close across the emulated link (the
	// server's final transport statistics), so that no packet of this
	// sample is in flight when the link is reset for the next one: about
	// one one-way delay of the link.
	Drain time.Duration
	// Prep is the part of Overhead the test spent, inside the client,
	// preparing before its measured part without measuring it: connecting
	// and completing an unmeasured request first (latency; page and site
	// with connection warm), the priming connection that fetches the
	// session ticket (handshake resumed and 0rtt), and for Chromium the
	// browser's start with a fresh profile (and its priming load with
	// connection warm). 0 when nothing precedes the measured part. When
	// the preparation fails, the time it took until it failed.
	Prep time.Duration
	// Slot is the testbed of a parallel run that took the sample (0..N-1;
	// 0 for a run of one testbed at a time), and Concurrency how many
	// testbeds were taking samples at once, this one included, at most
	// while it ran (1 when it ran alone).
	Slot        int
	Concurrency int
	Status      Status
	Error       string // cause when Status != StatusOK

	Value   float64            // the cell's primary metric (Cell.Metric)
	Metrics map[string]float64 // every scalar metric of the test, by name (docs/metrics.md)

	Negotiated Negotiated
	Transport  []TransportStats // one per connection used
	CPU        CPUUsage
	LinkUp     emu.Counters // emulator counters client->server during the sample
	LinkDown   emu.Counters // emulator counters server->client during the sample
	Warnings   []string     // validity warnings (CPU saturation, unexpected drops, clock problems)
	Timelines  []Series
	Resources  []Resource
	// Evidence is stored with the sample (store.DB.InsertSample) and not
	// loaded back with a dataset: store.DB.Evidence lists it.
	Evidence []Evidence
}

// Dataset is everything the statistics and the report need about one run.
type Dataset struct {
	Run     Run
	Cells   []Cell      // in plan order
	Samples []Sample    // all samples, including warm-up, failed and invalid ones, by cell then iteration
	Stops   []GroupStop // why each cell group of an adaptive run stopped iterating, by group; nil otherwise
}

// Reasons an adaptive run stopped iterating a cell group.
const (
	StopPrecision = "precision" // every protocol pair's interval was narrower than the target
	StopMaximum   = "maximum"   // the maximum iteration count was reached first
)

// GroupStop records why an adaptive run (a plan with a precision target)
// stopped iterating one cell group, and the precision it had then.
type GroupStop struct {
	Group      string  // Cell.Group
	Iterations int     // counted iterations taken
	Reason     string  // StopPrecision or StopMaximum
	Precision  float64 // widest pair's half-width, % of its median (+Inf when it could not be computed)
	WorstPair  string  // the pair with that half-width, e.g. "h3 vs h2"
}

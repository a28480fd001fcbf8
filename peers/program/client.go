// Package program runs the client programs of quicbench's peer program
// protocol (docs/peers.md, "The peer program protocol"): a program that
// reads one JSON request on its standard input, makes the requests of a
// sample over one HTTP/3 connection with its own stack, and prints one JSON
// record of the connection's and every request's timeline (nanoseconds from
// the sample's start, as quicbench's built-in client records them:
// endpoint.ConnTiming and endpoint.RequestTiming), what the connection
// negotiated and its transport statistics. Package workload derives the
// test's metrics from that record with the same code as the built-in
// client's, so that every client's numbers mean the same.
//
// aioquic's client (peers/aioquic/client.py), quiche's and quinn's speak it;
// each stack's package configures a Client with its program and registers
// it as a workload client.
package program

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Defaults of a client program's configuration (docs/metrics.md, "Peer
// clients").
const (
	// DefaultRcvBuf is the UDP receive buffer the client asks for: with
	// the kernel's default (208 KiB) a CPU-bound receiver (aioquic's, in
	// Python) overflows it on fast links (../shared/research/peers.md).
	DefaultRcvBuf = 4 << 20
	// DefaultMaxDatagramSize is the largest UDP payload the client sends:
	// what fits a 1500-byte MTU, quic-go's largest.
	DefaultMaxDatagramSize = 1452
	// Flow-control windows: quic-go's largest auto-tuned receive windows.
	DefaultMaxData       = 15 << 20
	DefaultMaxStreamData = 6 << 20
)

// killGrace is how long past the sample's timeout the program may take to
// print its record before it is killed; the program gives up on its own at
// the timeout.
const killGrace = 10 * time.Second

// maxOutput bounds the program's record (a chunk is about 20 bytes: a
// 1 GB download is about 15 MB of record).
const maxOutput = 512 << 20

// Client runs samples with a client program. Name and Argv are required;
// the other fields' zero values use the defaults above.
type Client struct {
	// Name names the program's stack in errors ("aioquic client: ...").
	Name string
	// Argv is the program and its arguments; the request goes to its
	// standard input.
	Argv []string
	// CC is the stack's congestion control: a sample's plan cc is asked
	// for when the stack can run it (peers.CC.QUICFor), else its default.
	CC peers.CC
	// RcvBuf is the SO_RCVBUF to ask for: 0 = DefaultRcvBuf, negative =
	// leave the kernel's default (tests of receiver drops).
	RcvBuf          int
	MaxDatagramSize int // 0 = DefaultMaxDatagramSize
	// KeyLog, when set, is the file the program appends TLS secrets to.
	KeyLog string
}

// request is the program's input (see client.py's docstring).
type request struct {
	Host             string   `json:"host"`
	Port             int      `json:"port"`
	ServerName       string   `json:"server_name,omitempty"`
	CAPEM            string   `json:"ca_pem,omitempty"`
	Paths            []string `json:"paths"`
	Repeat           int      `json:"repeat"`
	Parallel         int      `json:"parallel"`
	Upload           int64    `json:"upload"`
	Warm             bool     `json:"warm"`
	HandshakeTimeout float64  `json:"handshake_timeout"`
	FirstByteTimeout float64  `json:"first_byte_timeout"`
	IdleTimeout      float64  `json:"idle_timeout"`
	Timeout          float64  `json:"timeout"`
	CongestionCtl    string   `json:"congestion_control"`
	MaxDatagramSize  int      `json:"max_datagram_size"`
	MaxData          int      `json:"max_data"`
	MaxStreamData    int      `json:"max_stream_data"`
	RcvBuf           int      `json:"rcvbuf"`
	QlogDir          string   `json:"qlog_dir,omitempty"`
	KeyLog           string   `json:"keylog,omitempty"`
}

// Fetch runs spec (an h3 FetchSpec of the download, upload, ttfb, latency
// or multiplex test) with the client program against req's target; it is
// a workload.PeerFetch. The program runs in the calling process's network
// namespace, in a process group of its own that is killed when ctx ends or
// the sample's timeout passes. The FetchResult's CPU is the program's own
// CPU time from just before the sample's clock started (an interpreter's
// start and imports excluded) to its exit; extra holds the receive buffer
// the kernel granted and the datagram size used. Malformed output fails the
// sample with an error that says what was wrong.
func (c *Client) Fetch(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
	in, want, err := c.request(req, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s client: %w", c.Name, err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, nil, err
	}
	limit := time.Duration(in.Timeout*float64(time.Second)) + killGrace
	out, cpu, err := c.run(ctx, body, limit)
	if err != nil {
		return nil, nil, err
	}
	return parse(c.Name, out, want, cpu)
}

// request builds the program's input from spec and req's target.
func (c *Client) request(req workload.Request, spec endpoint.FetchSpec) (request, int, error) {
	switch {
	case spec.Proto != model.ProtoH3:
		return request{}, 0, fmt.Errorf("speaks h3 only, not %s", spec.Proto)
	case spec.Resume || spec.ZeroRTT:
		return request{}, 0, errors.New("does not measure resumed or 0-RTT handshakes")
	case spec.Page:
		return request{}, 0, errors.New("does not load pages")
	case spec.Verify || spec.Insecure || spec.KeyLog != nil:
		return request{}, 0, errors.New("neither verifies bodies, skips certificate checks nor logs TLS keys to a writer")
	case len(spec.Paths) == 0:
		return request{}, 0, errors.New("no paths to request")
	case spec.Repeat < 0 || spec.Parallel < 0 || spec.Upload < 0:
		return request{}, 0, errors.New("the repeat count, parallelism and upload size must not be negative")
	}
	t := req.Target
	if t.Host == "" || t.Port <= 0 {
		return request{}, 0, fmt.Errorf("target %q port %d: want a host and a port", t.Host, t.Port)
	}
	secs := func(d, def time.Duration) float64 {
		if d <= 0 {
			d = def
		}
		return d.Seconds()
	}
	in := request{
		Host: t.Host, Port: t.Port, ServerName: spec.ServerName, CAPEM: t.CAPEM,
		Paths: spec.Paths, Repeat: max(spec.Repeat, 1), Parallel: max(spec.Parallel, 1),
		Upload: spec.Upload, Warm: spec.Warm,
		HandshakeTimeout: secs(spec.HandshakeTimeout, endpoint.DefaultHandshakeTimeout),
		FirstByteTimeout: secs(spec.FirstByteTimeout, endpoint.DefaultFirstByteTimeout),
		IdleTimeout:      secs(spec.IdleTimeout, endpoint.DefaultIdleTimeout),
		Timeout:          secs(spec.Timeout, endpoint.DefaultTimeout),
		CongestionCtl:    c.congestionControl(req.CC),
		MaxDatagramSize:  cmp(c.MaxDatagramSize, DefaultMaxDatagramSize),
		MaxData:          DefaultMaxData,
		MaxStreamData:    DefaultMaxStreamData,
		RcvBuf:           max(cmp(c.RcvBuf, DefaultRcvBuf), 0),
		QlogDir:          spec.QlogDir,
		KeyLog:           c.KeyLog,
	}
	return in, len(spec.Paths) * in.Repeat, nil
}

// congestionControl is what the program is asked to run over QUIC for a
// sample whose plan asks for cc ("" = model.DefaultCC).
func (c *Client) congestionControl(cc string) string {
	algo, _ := c.CC.QUICFor(cmp(cc, model.DefaultCC))
	return algo
}

// cmp returns v, or def when v is the zero value.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// run runs the program with input body and returns its standard output and
// CPU time. It is killed (with its process group) when ctx ends or limit
// passes, and when the calling thread dies.
func (c *Client) run(ctx context.Context, body []byte, limit time.Duration) ([]byte, endpoint.CPUTime, error) {
	if len(c.Argv) == 0 {
		return nil, endpoint.CPUTime{}, fmt.Errorf("%s client: no program to run (see quicbench doctor)", c.Name)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit, &endpoint.TimeoutError{Phase: endpoint.PhaseTotal, Limit: limit})
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	stdout := &capped{max: maxOutput}
	stderr := &capped{max: 8 << 10, tail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var cpu endpoint.CPUTime
	if cmd.ProcessState != nil {
		cpu = endpoint.CPUTime{User: cmd.ProcessState.UserTime(), Sys: cmd.ProcessState.SystemTime()}
	}
	if cause := context.Cause(ctx); cause != nil {
		return nil, cpu, fmt.Errorf("%s client killed: %w", c.Name, cause)
	}
	if stdout.over {
		return nil, cpu, fmt.Errorf("%s client: its record exceeds %d bytes", c.Name, maxOutput)
	}
	if err != nil {
		return nil, cpu, fmt.Errorf("%s client (%s): %v: %s", c.Name, c.Argv[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), cpu, nil
}

// capped is a buffer that keeps at most max bytes: the first ones, or the
// last ones when tail is set.
type capped struct {
	bytes.Buffer
	max  int
	tail bool
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if c.tail {
		c.Buffer.Write(p)
		if c.Len() > c.max {
			b := slices.Clone(c.Bytes()[c.Len()-c.max:])
			c.Reset()
			c.Buffer.Write(b)
		}
		return n, nil
	}
	if c.Len()+len(p) > c.max {
		c.over = true
		p = p[:max(c.max-c.Len(), 0)]
	}
	c.Buffer.Write(p)
	return n, nil
}

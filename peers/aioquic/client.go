// Package aioquic runs aioquic's HTTP/3 client (client.py beside this file,
// carried in the binary) as quicbench's client "aioquic": a second QUIC and
// HTTP/3 stack, in Python, on the client side of a sample.
//
// The agent runs the program inside the client namespace once per sample
// (Client.Fetch, a workload.PeerFetch). The program records the connection
// and every request as the built-in client does (endpoint.ConnTiming and
// endpoint.RequestTiming, nanoseconds from the sample's start), so that
// package workload derives the test's metrics from its record with the same
// code as the built-in client's. Its transport statistics come from
// aioquic's recovery state, which aioquic keeps in private attributes: the
// program refuses any other aioquic than Version, and Check (quicbench
// doctor, and a test) exercises the attributes it reads.
//
// The interpreter is the virtual environment scripts/setup.sh installs
// aioquic into (peers/aioquic/.venv, requirements.txt pins Version); see
// FindPython.
package aioquic

import (
	"bytes"
	"context"
	_ "embed"
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

// Version is the aioquic release the client program reads the private
// recovery state of (peers/aioquic/requirements.txt pins it).
const Version = "1.7.2"

// Program is peers/aioquic/client.py, carried in the binary so that the
// program the agent runs always matches this package.
//
//go:embed client.py
var Program string

// Defaults of the client's configuration (docs/metrics.md, "aioquic").
const (
	// DefaultRcvBuf is the UDP receive buffer the client asks for: with
	// the kernel's default (208 KiB) the CPU-bound Python receiver
	// overflows it on fast links (../shared/research/peers.md).
	DefaultRcvBuf = 4 << 20
	// DefaultCongestionControl is aioquic's algorithm the client uses:
	// Cubic, as quic-go (aioquic's own default is Reno).
	DefaultCongestionControl = "cubic"
	// DefaultMaxDatagramSize is the largest UDP payload the client sends:
	// what fits a 1500-byte MTU, quic-go's largest (aioquic's own default
	// is 1200 and it has no path MTU discovery).
	DefaultMaxDatagramSize = 1452
	// Flow-control windows: quic-go's largest auto-tuned receive windows
	// (aioquic's own are 1 MiB and fixed).
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

// Client runs samples with the aioquic client program. Its zero value with
// Python set uses the defaults above.
type Client struct {
	Python string // the interpreter of the venv holding aioquic (FindPython)
	// RcvBuf is the SO_RCVBUF to ask for: 0 = DefaultRcvBuf, negative =
	// leave the kernel's default (tests of receiver drops).
	RcvBuf            int
	CongestionControl string // "cubic" or "reno"; "" = DefaultCongestionControl
	MaxDatagramSize   int    // 0 = DefaultMaxDatagramSize
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
}

// Fetch runs spec (an h3 FetchSpec of the download, upload, ttfb, latency
// or multiplex test) with the aioquic client against req's target; it is a
// workload.PeerFetch. The program runs in the calling process's network
// namespace, in a process group of its own that is killed when ctx ends or
// the sample's timeout passes. The FetchResult's CPU is the program's own
// CPU time from just before the sample's clock started (its interpreter's
// start and imports excluded) to its exit; extra holds the receive buffer
// the kernel granted and the datagram size used. Malformed output fails the
// sample with an error that says what was wrong.
func (c *Client) Fetch(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
	in, want, err := c.request(req, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("aioquic client: %w", err)
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
	return parse(out, want, cpu)
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
		return request{}, 0, errors.New("neither verifies bodies, skips certificate checks nor logs TLS keys")
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
		CongestionCtl:    cmp(c.CongestionControl, DefaultCongestionControl),
		MaxDatagramSize:  cmp(c.MaxDatagramSize, DefaultMaxDatagramSize),
		MaxData:          DefaultMaxData,
		MaxStreamData:    DefaultMaxStreamData,
		RcvBuf:           max(cmp(c.RcvBuf, DefaultRcvBuf), 0),
		QlogDir:          spec.QlogDir,
	}
	return in, len(spec.Paths) * in.Repeat, nil
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
	if c.Python == "" {
		return nil, endpoint.CPUTime{}, errors.New("aioquic client: no Python interpreter (see quicbench doctor)")
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit, &endpoint.TimeoutError{Phase: endpoint.PhaseTotal, Limit: limit})
	defer cancel()
	// -I: isolated mode (no PYTHON* variables, no user site directory).
	cmd := exec.CommandContext(ctx, c.Python, "-I", "-c", Program)
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
		return nil, cpu, fmt.Errorf("aioquic client killed: %w", cause)
	}
	if stdout.over {
		return nil, cpu, fmt.Errorf("aioquic client: its record exceeds %d bytes", maxOutput)
	}
	if err != nil {
		return nil, cpu, fmt.Errorf("aioquic client (%s): %v: %s", c.Python, err, strings.TrimSpace(stderr.String()))
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

// FindPython returns the interpreter of the aioquic peer's virtual
// environment, the one the aioquic server runs with too
// (peers.FindAioquic: $QUICBENCH_AIOQUIC, else peers/aioquic/.venv near
// the executable or the working directory).
func FindPython() (string, error) { return peers.FindAioquic() }

// EnvVar names the environment variable that tells FindPython where the
// aioquic peer is: a directory holding .venv (like peers/aioquic).
const EnvVar = peers.AioquicEnvVar

// Check runs the program's self-check with python (client.py --check): it
// builds an aioquic client connection in memory, lets it send and time out,
// and reads its recovery state through the private attributes the client
// relies on. It returns aioquic's version, or why the client cannot work.
func Check(ctx context.Context, python string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, python, "-I", "-c", Program, "--check").CombinedOutput()
	out := strings.TrimSpace(string(b))
	if err != nil {
		return "", fmt.Errorf("aioquic client self-check (%s client.py --check): %v: %s", python, err, out)
	}
	var rep struct {
		Version string `json:"aioquic_version"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Version == "" {
		return "", fmt.Errorf("aioquic client self-check printed no version: %q", out)
	}
	if rep.Version != Version {
		return rep.Version, fmt.Errorf("aioquic %s is installed, the client needs %s (peers/aioquic/requirements.txt)", rep.Version, Version)
	}
	return rep.Version, nil
}

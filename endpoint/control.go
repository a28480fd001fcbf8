package endpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quicbench/quicbench/model"
)

// The control protocol lets a controller (the runner, in another network
// namespace) drive a server process: `quicbench serve --control` prints one
// ControlReady JSON line on stdout once it listens, then answers each JSON
// line read on stdin with one ControlResponse line:
//
//	{"op":"ping"}                                      -> {"ok":true}
//	{"op":"cpu"}                                       -> {"ok":true,"cpu":{"user_ns":..,"sys_ns":..}}
//	{"op":"stats","conns":[{"kind":"tcp","addr":"10.0.0.1:40000"}],"wait_ms":2000}
//	                                                   -> {"ok":true,"stats":[{"kind":..,"addr":..,"stats":{..}}]}
//	{"op":"quit"}                                      -> {"ok":true}, then the server closes
//
// Requests are answered in order. End of stdin quits too, so the server
// never outlives its controller. A malformed line or unknown op gets
// {"ok":false,"error":"..."} and the session continues.

// Control operations.
const (
	OpPing  = "ping"
	OpCPU   = "cpu"
	OpStats = "stats"
	OpQuit  = "quit"
)

// ControlReady is the first line a controlled server prints.
type ControlReady struct {
	Event string `json:"event"` // "ready"
	ServerInfo
}

// ConnRef names a connection by transport kind ("tcp" or "quic") and the
// client's address as the client recorded it (ConnTiming.Local).
type ConnRef struct {
	Kind string `json:"kind"`
	Addr string `json:"addr"`
}

// ControlRequest is one command line.
type ControlRequest struct {
	Op     string    `json:"op"`
	Conns  []ConnRef `json:"conns,omitempty"`   // stats: connections wanted
	WaitMs int       `json:"wait_ms,omitempty"` // stats: how long to wait for connections to end (default 2000)
}

// ConnStatsReply is the server-side statistics of one connection.
type ConnStatsReply struct {
	ConnRef
	Stats *model.TransportStats `json:"stats,omitempty"`
	Error string                `json:"error,omitempty"`
}

// ControlResponse answers one ControlRequest.
type ControlResponse struct {
	OK    bool             `json:"ok"`
	Error string           `json:"error,omitempty"`
	CPU   *CPUTime         `json:"cpu,omitempty"`
	Stats []ConnStatsReply `json:"stats,omitempty"`
}

const maxControlLine = 1 << 20

// ServeControl runs the control protocol for srv: it writes the ready line
// to out, then answers requests from in until a quit request, the end of
// in (both return nil) or ctx's end (returns ctx's error). It does not close
// srv.
func ServeControl(ctx context.Context, srv *Server, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	if err := enc.Encode(ControlReady{Event: "ready", ServerInfo: srv.Info()}); err != nil {
		return fmt.Errorf("control: writing ready line: %w", err)
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), maxControlLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("control: reading commands: %w", err)
			}
			return nil
		case line := <-lines:
			if len(line) == 0 {
				continue
			}
			resp, quit := handleControl(ctx, srv, line)
			if err := enc.Encode(resp); err != nil {
				return fmt.Errorf("control: writing response: %w", err)
			}
			if quit {
				return nil
			}
		}
	}
}

func handleControl(ctx context.Context, srv *Server, line []byte) (ControlResponse, bool) {
	var req ControlRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return ControlResponse{Error: fmt.Sprintf("malformed request %q: %v", truncate(line, 80), err)}, false
	}
	switch req.Op {
	case OpPing:
		return ControlResponse{OK: true}, false
	case OpQuit:
		return ControlResponse{OK: true}, true
	case OpCPU:
		c, err := srv.CPU()
		if err != nil {
			return ControlResponse{Error: err.Error()}, false
		}
		return ControlResponse{OK: true, CPU: &c}, false
	case OpStats:
		if len(req.Conns) == 0 {
			return ControlResponse{Error: `stats needs "conns": [{"kind":"tcp"|"quic","addr":"ip:port"}]`}, false
		}
		wait := 2 * time.Second
		if req.WaitMs > 0 {
			wait = time.Duration(req.WaitMs) * time.Millisecond
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		out := make([]ConnStatsReply, len(req.Conns))
		var wg sync.WaitGroup
		for i, c := range req.Conns {
			out[i].ConnRef = c
			if c.Kind != "tcp" && c.Kind != "quic" {
				out[i].Error = fmt.Sprintf("kind %q: want tcp or quic", c.Kind)
				continue
			}
			wg.Go(func() {
				st, err := srv.ConnStats(wctx, c.Kind, c.Addr)
				if err != nil {
					out[i].Error = err.Error()
					return
				}
				out[i].Stats = &st
			})
		}
		wg.Wait()
		return ControlResponse{OK: true, Stats: out}, false
	default:
		return ControlResponse{Error: fmt.Sprintf("unknown op %q (want ping, cpu, stats or quit)", req.Op)}, false
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// ControlClient is the controller's side of the control protocol, over a
// server process's stdout (r) and stdin (w). It is not safe for concurrent
// use.
type ControlClient struct {
	sc  *bufio.Scanner
	enc *json.Encoder
}

// NewControlClient wraps a controlled server's output and input.
func NewControlClient(r io.Reader, w io.Writer) *ControlClient {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxControlLine)
	return &ControlClient{sc: sc, enc: json.NewEncoder(w)}
}

// Ready reads the server's ready line.
func (c *ControlClient) Ready() (ServerInfo, error) {
	if !c.sc.Scan() {
		return ServerInfo{}, fmt.Errorf("control: server ended before its ready line: %v", scanErr(c.sc))
	}
	var r ControlReady
	if err := json.Unmarshal(c.sc.Bytes(), &r); err != nil || r.Event != "ready" {
		return ServerInfo{}, fmt.Errorf("control: unexpected first line %q", truncate(c.sc.Bytes(), 200))
	}
	return r.ServerInfo, nil
}

func scanErr(sc *bufio.Scanner) error {
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

func (c *ControlClient) call(req ControlRequest) (ControlResponse, error) {
	if err := c.enc.Encode(req); err != nil {
		return ControlResponse{}, fmt.Errorf("control: sending %s: %w", req.Op, err)
	}
	if !c.sc.Scan() {
		return ControlResponse{}, fmt.Errorf("control: no answer to %s: %v", req.Op, scanErr(c.sc))
	}
	var resp ControlResponse
	if err := json.Unmarshal(c.sc.Bytes(), &resp); err != nil {
		return ControlResponse{}, fmt.Errorf("control: malformed answer %q: %w", truncate(c.sc.Bytes(), 200), err)
	}
	if !resp.OK {
		return resp, errors.New("control: " + resp.Error)
	}
	return resp, nil
}

// Ping checks that the server answers.
func (c *ControlClient) Ping() error {
	_, err := c.call(ControlRequest{Op: OpPing})
	return err
}

// CPU returns the server process's cumulative CPU time.
func (c *ControlClient) CPU() (CPUTime, error) {
	resp, err := c.call(ControlRequest{Op: OpCPU})
	if err != nil {
		return CPUTime{}, err
	}
	if resp.CPU == nil {
		return CPUTime{}, errors.New("control: cpu answer without cpu")
	}
	return *resp.CPU, nil
}

// ConnStats returns the server-side statistics of the given connections,
// waiting up to wait for them to end on the server.
func (c *ControlClient) ConnStats(wait time.Duration, conns ...ConnRef) ([]ConnStatsReply, error) {
	resp, err := c.call(ControlRequest{Op: OpStats, Conns: conns, WaitMs: int(wait / time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// Quit asks the server to exit.
func (c *ControlClient) Quit() error {
	_, err := c.call(ControlRequest{Op: OpQuit})
	return err
}

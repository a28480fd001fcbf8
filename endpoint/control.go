package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/model"
)

// The control channel lets a controller (the runner, in another network
// namespace) drive a server process: `quicbench serve --control` serves
// the server role of package control on its standard input and output.
// Its hello, printed once it listens, is its ServerInfo; it answers
// ping, cpu (its CPUTime), stats (StatsRequest -> []ConnStatsReply) and
// quit (after which it closes). End of input quits too, so the server
// never outlives its controller.

// ConnRef names a connection by transport kind ("tcp" or "quic") and the
// client's address as the client recorded it (ConnTiming.Local).
type ConnRef struct {
	Kind string `json:"kind"`
	Addr string `json:"addr"`
}

// StatsRequest asks a controlled server for the statistics of
// connections.
type StatsRequest struct {
	Conns  []ConnRef `json:"conns"`             // the connections wanted
	WaitMs int       `json:"wait_ms,omitempty"` // how long to wait for them to end (default 2000)
}

// ConnStatsReply is the server-side statistics of one connection.
type ConnStatsReply struct {
	ConnRef
	Stats *model.TransportStats `json:"stats,omitempty"`
	// Open says the connection had not ended when the wait gave up and
	// Stats were read from it open (ErrStillOpen).
	Open  bool   `json:"open,omitempty"`
	Error string `json:"error,omitempty"`
}

// Controlled is what the control channel serves: quicbench's own *Server
// or a peer implementation run by quicbench (*PeerServer).
type Controlled interface {
	// Info is the hello.
	Info() ServerInfo
	// CPU is the cumulative CPU time of the server's processes.
	CPU() (CPUTime, error)
	// ConnStats waits for the server-side statistics of the connection
	// of kind ("tcp" or "quic") from the client address addr.
	ConnStats(ctx context.Context, kind, addr string) (model.TransportStats, error)
}

// ServeControl serves the control channel for srv: it writes the hello
// (srv.Info()) to out, then answers requests from in until a quit request,
// the end of in (both return nil) or ctx's end (returns ctx's error). It
// does not close srv.
func ServeControl(ctx context.Context, srv Controlled, in io.Reader, out io.Writer) error {
	return controlServer(srv).Serve(ctx, in, out)
}

// controlServer is srv's side of the server role.
func controlServer(srv Controlled) *control.Server {
	s := control.NewServer(control.RoleServer)
	s.Hello = srv.Info()
	control.Handle(s, control.Ping, func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil })
	control.Handle(s, control.Quit, func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil })
	s.Final(control.Quit)
	control.Handle(s, control.CPU, func(context.Context, struct{}) (CPUTime, error) { return srv.CPU() })
	control.Handle(s, control.Stats, func(ctx context.Context, req StatsRequest) ([]ConnStatsReply, error) {
		return connStats(ctx, srv, req)
	})
	replayOf := func() (*replay.Origins, error) {
		if rs, ok := srv.(ReplayServer); ok && rs.ReplayOrigins() != nil {
			return rs.ReplayOrigins(), nil
		}
		return nil, replay.ErrNotServing
	}
	control.Handle(s, control.ReplayBegin, func(_ context.Context, req ReplayBegin) (struct{}, error) {
		o, err := replayOf()
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, o.Begin(req.Site, req.Protocol)
	})
	control.Handle(s, control.ReplayEnd, func(context.Context, struct{}) (replay.Stats, error) {
		o, err := replayOf()
		if err != nil {
			return replay.Stats{}, err
		}
		return o.End(), nil
	})
	return s
}

// ReplayBegin starts a replay sample (control.ReplayBegin): the archive
// to answer from and the protocol the sample uses.
type ReplayBegin struct {
	Site     string `json:"site"`
	Protocol string `json:"protocol"`
}

// connStats answers a stats request.
func connStats(ctx context.Context, srv Controlled, req StatsRequest) ([]ConnStatsReply, error) {
	if len(req.Conns) == 0 {
		return nil, errors.New(`stats needs "conns": [{"kind":"tcp"|"quic","addr":"ip:port"}]`)
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
			if errors.Is(err, ErrStillOpen) {
				out[i].Stats, out[i].Open = &st, true
				return
			}
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Stats = &st
		})
	}
	wg.Wait()
	return out, nil
}

// ControlClient is the controller's side of the control channel, over a
// server process's stdout (r) and stdin (w). It is safe for concurrent
// use; calls are made one at a time.
type ControlClient struct {
	c *control.Client
}

// NewControlClient wraps a controlled server's output and input.
func NewControlClient(r io.Reader, w io.Writer) *ControlClient {
	return &ControlClient{c: control.NewClient(control.RoleServer, w, r)}
}

// Ready reads the server's hello, sent once it listens.
func (c *ControlClient) Ready() (ServerInfo, error) {
	var info ServerInfo
	err := c.c.Hello(context.Background(), &info)
	return info, err
}

// Ping checks that the server answers.
func (c *ControlClient) Ping() error {
	return c.c.Call(context.Background(), control.Ping, nil, nil)
}

// CPU returns the server process's cumulative CPU time.
func (c *ControlClient) CPU() (CPUTime, error) {
	var t CPUTime
	err := c.c.Call(context.Background(), control.CPU, nil, &t)
	return t, err
}

// ConnStats returns the server-side statistics of the given connections,
// waiting up to wait for them to end on the server.
func (c *ControlClient) ConnStats(wait time.Duration, conns ...ConnRef) ([]ConnStatsReply, error) {
	var out []ConnStatsReply
	err := c.c.Call(context.Background(), control.Stats, StatsRequest{Conns: conns, WaitMs: int(wait / time.Millisecond)}, &out)
	return out, err
}

// ReplayBegin starts a replay sample of archive site over protocol.
func (c *ControlClient) ReplayBegin(site, protocol string) error {
	return c.c.Call(context.Background(), control.ReplayBegin, ReplayBegin{Site: site, Protocol: protocol}, nil)
}

// ReplayEnd ends the replay sample and returns what was served.
func (c *ControlClient) ReplayEnd() (replay.Stats, error) {
	var st replay.Stats
	err := c.c.Call(context.Background(), control.ReplayEnd, nil, &st)
	return st, err
}

// Quit asks the server to exit.
func (c *ControlClient) Quit() error {
	return c.c.Call(context.Background(), control.Quit, nil, nil)
}

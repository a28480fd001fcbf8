package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/child"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/workload"
)

// serverProc is `quicbench serve --control` in the server namespace.
type serverProc struct {
	*child.Process
	ctl  *endpoint.ControlClient
	info endpoint.ServerInfo
	cc   string // congestion control it was started with (while parked)
	mu   sync.Mutex
}

func startServer(ctx context.Context, tb *netns.Testbed, exe string, args []string) (*serverProc, error) {
	cmd := tb.Command(context.WithoutCancel(ctx), netns.Server, exe, append([]string{"serve", "--control"}, args...)...)
	c, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &serverProc{Process: c, ctl: endpoint.NewControlClient(c.Stdout, c.Stdin)}
	ready := make(chan error, 1)
	go func() {
		info, err := s.ctl.Ready()
		s.info = info
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("no ready line within 30 s")
	}
	if err != nil {
		c.Stop(time.Second)
		return nil, fmt.Errorf("server: %v (%s)", err, c.Describe())
	}
	return s, nil
}

// cpu returns the server process's cumulative CPU time.
func (s *serverProc) cpu() (endpoint.CPUTime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctl.CPU()
}

func (s *serverProc) close() {
	s.mu.Lock()
	_ = s.ctl.Quit()
	s.mu.Unlock()
	s.Stop(3 * time.Second)
}

// agentProc is `quicbench agent` in the client namespace.
type agentProc struct {
	*child.Process
	ctl *control.Client
}

func startAgent(ctx context.Context, tb *netns.Testbed, exe string) (*agentProc, error) {
	cmd := tb.Command(context.WithoutCancel(ctx), netns.Client, exe, "agent")
	c, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start client agent: %w", err)
	}
	a := &agentProc{Process: c, ctl: control.NewClient(control.RoleAgent, c.Stdin, c.Stdout)}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var pong string
	if err := a.ctl.Call(pctx, control.Ping, nil, &pong); err != nil {
		c.Stop(time.Second)
		return nil, fmt.Errorf("client agent: %v (%s)", err, c.Describe())
	}
	return a, nil
}

// run runs req in the agent and decodes its result into res.
func (a *agentProc) run(ctx context.Context, req workload.Request, res *workload.Result) error {
	return a.ctl.Call(ctx, control.Run, req, res)
}

// clientVersion asks the agent which program its samples of client run
// (a browser's product, "Chrome/156.0.8078.73"), which the agent reads by
// starting it once as for its samples.
func (a *agentProc) clientVersion(ctx context.Context, client string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var v string
	err := a.ctl.Call(ctx, control.ClientVersion, client, &v)
	return v, err
}

func (a *agentProc) close() { a.Stop(3 * time.Second) }

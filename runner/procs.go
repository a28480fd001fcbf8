package runner

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/ctl"
	"github.com/quicbench/quicbench/netns"
)

// tailBuffer keeps the last bytes a child wrote to stderr, for error
// messages when it dies.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// child is a helper process inside a namespace, driven over its stdio.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	exited chan struct{}
}

func startChild(cmd *exec.Cmd) (*child, error) {
	c := &child{cmd: cmd, stderr: &tailBuffer{}, exited: make(chan struct{})}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if c.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { cmd.Wait(); close(c.exited) }()
	return c, nil
}

// stop closes stdin (the child's signal to exit), then kills it if it has
// not exited within grace.
func (c *child) stop(grace time.Duration) {
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *child) describeExit() string {
	select {
	case <-c.exited:
		s := "exited"
		if c.cmd.ProcessState != nil {
			s = c.cmd.ProcessState.String()
		}
		if t := c.stderr.String(); t != "" {
			s += ": " + t
		}
		return s
	default:
		return "running"
	}
}

// serverProc is `quicbench serve --control` in the server namespace.
type serverProc struct {
	*child
	ctl  *endpoint.ControlClient
	info endpoint.ServerInfo
	mu   sync.Mutex
}

func startServer(ctx context.Context, tb *netns.Testbed, exe string, args []string) (*serverProc, error) {
	cmd := tb.Command(context.WithoutCancel(ctx), netns.Server, exe, append([]string{"serve", "--control"}, args...)...)
	c, err := startChild(cmd)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &serverProc{child: c, ctl: endpoint.NewControlClient(c.stdout, c.stdin)}
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
		c.stop(time.Second)
		return nil, fmt.Errorf("server: %v (%s)", err, c.describeExit())
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
	s.stop(3 * time.Second)
}

// agentProc is `quicbench agent` in the client namespace.
type agentProc struct {
	*child
	ctl *ctl.Client
}

func startAgent(ctx context.Context, tb *netns.Testbed, exe string) (*agentProc, error) {
	cmd := tb.Command(context.WithoutCancel(ctx), netns.Client, exe, "agent")
	c, err := startChild(cmd)
	if err != nil {
		return nil, fmt.Errorf("start client agent: %w", err)
	}
	a := &agentProc{child: c, ctl: ctl.NewClient(c.stdin, c.stdout)}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var pong string
	if err := a.ctl.Call(pctx, "ping", nil, &pong); err != nil {
		c.stop(time.Second)
		return nil, fmt.Errorf("client agent: %v (%s)", err, c.describeExit())
	}
	return a, nil
}

func (a *agentProc) close() { a.stop(3 * time.Second) }

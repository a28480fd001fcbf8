// Package child runs the helper processes quicbench drives over their
// standard input and output (the server and client agent of a run, the bulk
// endpoints of calibrate), each inside a network namespace of its own.
// What they say over those is package control.
//
// Every endpoint runs in a process of its own rather than in the process
// that hosts the emulator: the emulator's forwarding threads keep their Go
// scheduler slot while they sleep (for their timing precision), which stalls
// timer-driven Go code sharing their process.
package child

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Process is a started helper process: write to Stdin, read from Stdout;
// the end of its standard error is kept for error messages.
type Process struct {
	Cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	stderr tail
	exited chan struct{}
	once   sync.Once
}

// Start starts cmd (whose Stdin, Stdout and Stderr must be unset) with pipes
// to its standard input and output and a watcher that reaps it. Its stdout
// is a pipe of its own, not exec.Cmd.StdoutPipe, which Wait closes as soon
// as the process exits, possibly before its last lines are read.
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	var err error
	if p.Stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		p.Stdin.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, &p.stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		p.Stdin.Close()
		return nil, err
	}
	p.Stdout = r
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop closes the process's standard input (its signal to exit), kills it
// if it has not exited within grace, and reaps it. It is idempotent and
// safe for concurrent use.
func (p *Process) Stop(grace time.Duration) {
	p.once.Do(func() {
		p.Stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		p.Stdout.Close()
	})
}

// Describe says how the process ended ("running" while it runs), with the
// end of what it wrote to its standard error.
func (p *Process) Describe() string {
	select {
	case <-p.exited:
		s := "exited"
		if p.Cmd.ProcessState != nil {
			s = p.Cmd.ProcessState.String()
		}
		if t := p.stderr.String(); t != "" {
			s += ": " + t
		}
		return s
	default:
		return "running"
	}
}

// tail keeps the last 4 KiB a process wrote to its standard error.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4096

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailMax {
		t.buf = t.buf[len(t.buf)-tailMax:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/workload"
)

// The agent serves exactly the agent role's operations, and answers them
// through `quicbench agent`.
func TestAgentServesItsTable(t *testing.T) {
	if err := agentServer(&workload.Executor{}).Check(); err != nil {
		t.Fatal(err)
	}
	c, stop := startAgentCLI(t)
	var pong string
	if err := c.Call(context.Background(), control.Ping, nil, &pong); err != nil || pong != "pong" {
		t.Fatalf("ping: %v %q", err, pong)
	}
	var cpu endpoint.CPUTime
	if err := c.Call(context.Background(), control.CPU, nil, &cpu); err != nil || cpu.User+cpu.Sys <= 0 {
		t.Fatalf("cpu: %v %+v", err, cpu)
	}
	stop()
}

// The agent reads the version of the browser it runs a client's samples
// with, for the runner to record with the run; a client without a version
// of its own, or unknown, is an error.
func TestAgentClientVersion(t *testing.T) {
	requireChromiumCLI(t)
	c, stop := startAgentCLI(t)
	var v string
	if err := c.Call(context.Background(), control.ClientVersion, "chromium", &v); err != nil || !strings.HasPrefix(v, "Chrome/") {
		t.Fatalf("chromium version: %v %q", err, v)
	}
	if err := c.Call(context.Background(), control.ClientVersion, "aioquic", &v); err == nil || !strings.Contains(err.Error(), "reports no version of its own") {
		t.Fatalf("aioquic version: %v", err)
	}
	if err := c.Call(context.Background(), control.ClientVersion, "nosuch", &v); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("unknown client: %v", err)
	}
	stop()
}

// startAgentCLI runs `quicbench agent` on pipes and returns a client of it
// and a stop function that ends its input and checks that it exited 0.
func startAgentCLI(t *testing.T) (*control.Client, func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), &Env{Stdin: inR, Stdout: outW, Stderr: io.Discard, Args: []string{"agent"}, Getenv: func(string) string { return "" }})
		outW.Close()
	}()
	return control.NewClient(control.RoleAgent, inW, outR), func() {
		t.Helper()
		inW.Close()
		if code := <-done; code != 0 {
			t.Fatalf("agent exited %d at the end of its input", code)
		}
	}
}

package cli

import (
	"context"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/control"
	_ "github.com/quicbench/quicbench/peers/all" // every built-in stack's code
	"github.com/quicbench/quicbench/workload"
)

func init() { Register("agent", newAgentCmd) }

func newAgentCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:    "agent",
		Short:  "Client agent: runs tests on request from the runner (internal)",
		Hidden: true,
		Long: `The client agent runs inside the client namespace, started by quicbench run.
It reads one JSON request per line on stdin and answers one JSON line on stdout.
It exits at the end of stdin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Chromium's (and Firefox's) children that outlive their parent
			// when the browser's process group is killed are re-parented to the
			// agent, which waits for them (browser.Session.Close), so their
			// CPU time counts in the agent's RUSAGE_CHILDREN: the sample's
			// browser CPU.
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
			// The clients keep what they keep across samples (the
			// browsers) until the agent ends.
			ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{Getenv: env.Getenv})}
			defer closeClients(ex.Clients)
			return agentServer(ex).Serve(cmd.Context(), env.Stdin, env.Stdout)
		},
	}
}

// closeClients releases what the clients keep across samples (their
// browsers), all at once: each browser's close waits for its processes.
func closeClients(clients map[string]workload.ClientImpl) {
	var wg sync.WaitGroup
	for _, c := range clients {
		if c.Close != nil {
			wg.Go(c.Close)
		}
	}
	wg.Wait()
}

// agentServer is the agent role of package control, running tests with ex.
func agentServer(ex *workload.Executor) *control.Server {
	s := control.NewServer(control.RoleAgent)
	control.Handle(s, control.Ping, func(context.Context, struct{}) (string, error) { return "pong", nil })
	control.Handle(s, control.CPU, func(context.Context, struct{}) (endpoint.CPUTime, error) { return endpoint.ProcessCPU() })
	control.Handle(s, control.Run, func(ctx context.Context, req workload.Request) (*workload.Result, error) {
		return ex.Execute(ctx, req), nil
	})
	control.Handle(s, control.ClientVersion, func(ctx context.Context, client string) (string, error) {
		c, ok := ex.Clients[client]
		switch {
		case !ok:
			return "", fmt.Errorf("client %q: not available in this agent", client)
		case c.Version == nil:
			return "", fmt.Errorf("client %s reports no version of its own", client)
		}
		return c.Version(ctx)
	})
	return s
}

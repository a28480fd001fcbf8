package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/ctl"
	"github.com/quicbench/quicbench/workload"
)

func init() { Register("agent", newAgentCmd) }

// Agent operations (package ctl framing over stdin/stdout).
const (
	agentOpPing = "ping"
	agentOpRun  = "run" // body: workload.Request, answer: workload.Result
	agentOpCPU  = "cpu" // answer: endpoint.CPUTime of the agent process
)

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
			// Chromium's children that outlive their parent when the
			// browser's process group is killed are re-parented to the
			// agent, which waits for them (browser.Session.Close), so their
			// CPU time counts in the agent's RUSAGE_CHILDREN: the sample's
			// browser CPU.
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
			ex := &workload.Executor{Browser: browserLoader(), Lighthouse: lighthouseLoader()}
			return ctl.Serve(cmd.Context(), env.Stdin, env.Stdout, func(ctx context.Context, op string, body json.RawMessage) (any, error) {
				switch op {
				case agentOpPing:
					return "pong", nil
				case agentOpCPU:
					return endpoint.ProcessCPU()
				case agentOpRun:
					var req workload.Request
					if err := json.Unmarshal(body, &req); err != nil {
						return nil, fmt.Errorf("run: bad request: %w", err)
					}
					return ex.Execute(ctx, req), nil
				}
				return nil, fmt.Errorf("unknown operation %q", op)
			})
		},
	}
}

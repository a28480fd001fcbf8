package cli

import (
	"context"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/model"
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
			// The browsers are kept across samples (a fresh context each)
			// and end with the agent.
			b := newAgentBrowsers()
			defer b.Close()
			ex := &workload.Executor{Browser: b.browserLoader(), Lighthouse: lighthouseLoader(), Firefox: b.firefoxLoader(), Aioquic: aioquicFetcher(env.Getenv),
				ChromiumBench: b.chromiumBench(), FirefoxBench: b.firefoxBench()}
			return agentServer(ex).Serve(cmd.Context(), env.Stdin, env.Stdout)
		},
	}
}

// agentServer is the agent role of package control, running tests with ex.
func agentServer(ex *workload.Executor) *control.Server {
	s := control.NewServer(control.RoleAgent)
	control.Handle(s, control.Ping, func(context.Context, struct{}) (string, error) { return "pong", nil })
	control.Handle(s, control.CPU, func(context.Context, struct{}) (endpoint.CPUTime, error) { return endpoint.ProcessCPU() })
	control.Handle(s, control.Run, func(ctx context.Context, req workload.Request) (*workload.Result, error) {
		return ex.Execute(ctx, req), nil
	})
	control.Handle(s, control.BrowserVersion, func(ctx context.Context, client string) (string, error) {
		if client == model.ClientFirefox {
			return firefoxVersion(ctx)
		}
		return browserVersion(ctx)
	})
	return s
}

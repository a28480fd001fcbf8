package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/child"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/internal/hostmap"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

func init() {
	Register("replay", newReplayCmd)
	Register("replay-exec", newReplayExecCmd)
}

// replayOpts are quicbench replay's options.
type replayOpts struct {
	protos  []string
	client  string
	loads   int
	missing string
	timeout time.Duration
	serve   bool
	name    string // --serve: the testbed's name (testbed exec --name)
}

func newReplayCmd(env *Env) *cobra.Command {
	var o replayOpts
	var lf *LinkFlags
	cmd := &cobra.Command{
		Use:   "replay PAGE.har|BUILTIN [-- COMMAND...]",
		Short: "Replay a recorded page (HAR) inside a testbed: every origin on its own address, h1, h2 or h3",
		Long: `Builds a testbed (the emulated link of --link, --up, --down), puts every origin of
the recorded page on an address of its own in the server namespace (origins that shared a
recorded serverIPAddress share one), serves them all with quicbench's server (HTTP/1.1,
HTTP/2 and HTTP/3 on each, a certificate per host name from the testbed's CA), and loads the
page --loads times per protocol with --client, printing for each load its page load time and
what the replay served: requests, unmatched (404), origins, connections per origin and
their protocols. The recorded host names resolve to the replay's addresses inside the
testbed only (docs/plan-format.md, "Recorded pages").

PAGE is a HAR file (quicbench record, or a browser's DevTools export) or a built-in page:
` + strings.Join(sites.PageNames(), ", ") + `.

With --serve (or a COMMAND after --) nothing is loaded: the replay is served until Ctrl-C,
the host mapping and each browser's settings that use it are printed, and COMMAND, if given,
runs in the client namespace with the recorded names mapped (its own mount namespace).`,
		Example: `  quicbench replay har-6x70 --link "delay 25ms 10ms loss 2%" --proto h2,h3 --loads 5
  quicbench replay page.har --client builtin --proto h1,h2,h3
  quicbench replay page.har --missing-bodies fill --link "delay 50ms" -- curl -sk https://www.example.com/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			var command []string
			if dash >= 0 {
				command = args[dash:]
				args = args[:dash]
			}
			if len(args) != 1 {
				return Usage(fmt.Errorf("want one recorded page, got %d arguments", len(args)), "quicbench replay PAGE.har [-- COMMAND...]")
			}
			return runReplay(cmd.Context(), env, args[0], o, lf, command)
		},
	}
	lf = AddLinkFlags(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&o.protos, "proto", []string{model.ProtoH3}, "protocols to load the page over, in order: h1, h2, h3 (comma-separated)")
	clients := replayClients()
	f.StringVar(&o.client, "client", clients[0], "who loads the page: "+strings.Join(clients, ", "))
	f.IntVar(&o.loads, "loads", 1, "page loads per protocol")
	f.StringVar(&o.missing, "missing-bodies", replay.MissingRefuse, "entries without a body: refuse, or fill them with bytes of the recorded size")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "the longest one page load may take")
	f.BoolVar(&o.serve, "serve", false, "serve the replay until interrupted instead of loading it")
	f.StringVar(&o.name, "name", "replay", "with --serve: the testbed's name, for quicbench testbed exec --name")
	return cmd
}

// replayPage reads a recorded page: a built-in one or a HAR file. It
// returns the archive (indexed), the file the server reads and a name.
func replayPage(page, dir, missing string) (*replay.Archive, string, error) {
	var h *har.HAR
	var err error
	file := page
	name := page
	if sites.IsPage(page) {
		b, err := sites.PageHAR(page)
		if err != nil {
			return nil, "", err
		}
		file = filepath.Join(dir, page+".har")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return nil, "", err
		}
		h, err = sites.Page(page)
		if err != nil {
			return nil, "", err
		}
	} else {
		if h, err = har.ReadFile(page); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, "", Usage(err, "give a HAR file or a built-in page: "+strings.Join(sites.PageNames(), ", "))
			}
			return nil, "", Usage(err, "a HAR 1.2 file, e.g. from quicbench record or a browser's DevTools (Save all as HAR with content)")
		}
		name = strings.TrimSuffix(filepath.Base(page), filepath.Ext(page))
	}
	a, err := replay.Prepare(name, h, replay.Options{Missing: missing, IndexOnly: true})
	var me *replay.MissingError
	if errors.As(err, &me) {
		return nil, "", Usage(err, "--missing-bodies fill serves filler bytes of the recorded size")
	}
	return a, file, err
}

func runReplay(ctx context.Context, env *Env, page string, o replayOpts, lf *LinkFlags, command []string) error {
	if o.missing != replay.MissingRefuse && o.missing != replay.MissingFill {
		return Usage(fmt.Errorf("--missing-bodies %q", o.missing), "refuse or fill")
	}
	for _, p := range o.protos {
		if p != model.ProtoH1 && p != model.ProtoH2 && p != model.ProtoH3 {
			return Usage(fmt.Errorf("--proto %q", p), "h1, h2 or h3")
		}
	}
	if clients := replayClients(); !slices.Contains(clients, o.client) {
		return Usage(fmt.Errorf("--client %q does not load recorded pages", o.client), strings.Join(clients, ", "))
	}
	if o.loads < 1 {
		return Usage(fmt.Errorf("--loads %d", o.loads), "at least 1")
	}
	up, down, err := lf.Links()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "quicbench-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a, file, err := replayPage(page, dir, o.missing)
	if err != nil {
		return err
	}
	layout, err := replay.NewLayout(a)
	if err != nil {
		return err
	}
	cfg := netns.Config{Up: up, Down: down, Seed: lf.Seed, CC: lf.CC}
	if o.serve && len(command) == 0 {
		// Served by hand: other tools enter the namespaces by name.
		cfg.Name, cfg.Persist = o.name, true
	}
	tb, err := netns.New(ctx, cfg)
	if err != nil {
		return testbedError(err)
	}
	defer tb.Close()
	srvAddr := tb.Addr(netns.Server)
	if err := layout.Assign(srvAddr); err != nil {
		return err
	}
	if err := tb.AddAddrs(netns.Server, layout.Addrs()...); err != nil {
		return err
	}
	spec := filepath.Join(dir, "replay.json")
	if err := replay.WriteSpec(spec, &replay.Spec{Sites: []replay.SiteSpec{{Name: a.Name, HAR: file, Missing: o.missing}}, Layout: *layout}); err != nil {
		return err
	}
	srv, err := child.Start(tb.Command(context.WithoutCancel(ctx), netns.Server, env.Exe, "serve", "--control", "--host", srvAddr.String(), "--cc", lf.CC, "--replay", spec))
	if err != nil {
		return fmt.Errorf("start the server: %w", err)
	}
	defer srv.Stop(3 * time.Second)
	ctl := endpoint.NewControlClient(srv.Stdout, srv.Stdin)
	info, err := ctl.Ready()
	if err != nil {
		return fmt.Errorf("server: %v (%s)", err, srv.Describe())
	}
	defer func() { _ = ctl.Quit() }()
	s := a.Summary
	fmt.Fprintf(env.Stdout, "replaying %s: %d entries from %s on %s (%d bytes), document %s\n",
		page, s.Served, plural(s.Origins, "origin"), addresses(len(layout.Groups)), s.Bytes, a.PageURL)
	if a.Summary.Missing > 0 {
		fmt.Fprintf(env.Stdout, "  %d entries without a body filled with %d bytes (--missing-bodies fill)\n", s.Missing, s.MissingBytes)
	}
	fmt.Fprintf(env.Stdout, "  link up %q down %q; server %s\n", up.String(), down.String(), info.Version)
	if o.serve || len(command) > 0 {
		return serveReplayUntil(ctx, env, tb, layout, info, command, dir)
	}
	agent, err := child.Start(agentCommand(ctx, env, tb))
	if err != nil {
		return fmt.Errorf("start the client agent: %w", err)
	}
	defer agent.Stop(3 * time.Second)
	actl := control.NewClient(control.RoleAgent, agent.Stdin, agent.Stdout)
	req := workload.Request{
		Test: plan.TestSite, Client: o.client, CC: lf.CC, Timeout: o.timeout,
		Params: plan.Params{Site: a.Name, Connection: plan.ConnCold},
		Target: workload.Target{Host: srvAddr.String(), Port: info.Port, PlainPort: info.PlainPort, CAPEM: info.CAPEM, SPKI: info.SPKI},
		Replay: &workload.Replay{Site: a.Name, PageURL: a.PageURL, Hosts: layout.HostAddrs(), Origins: layout.Origins(), URLs: a.URLs()},
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPROTO\tLOAD\tSTATUS\tPLT ms\tFCP ms\tREQUESTS\tUNMATCHED\tORIGINS\tCONNECTIONS\tBYTES\t")
	var last replay.Stats
	failed := 0
	for _, proto := range o.protos {
		for i := 1; i <= o.loads; i++ {
			req.Protocol = proto
			if err := ctl.ReplayBegin(a.Name, proto); err != nil {
				return err
			}
			var res workload.Result
			cctx, cancel := context.WithTimeout(ctx, o.timeout+30*time.Second)
			err := actl.Call(cctx, control.Run, req, &res)
			cancel()
			st, serr := ctl.ReplayEnd()
			if err != nil {
				return fmt.Errorf("client agent: %v (%s)", err, agent.Describe())
			}
			if serr != nil {
				return serr
			}
			last = st
			status := string(res.Status)
			if res.Status != model.StatusOK {
				failed++
				status += ": " + res.Error
			} else if st.Misrouted > 0 || st.WrongProtocol > 0 {
				failed++
				status = fmt.Sprintf("invalid: %d misrouted, %d over another protocol", st.Misrouted, st.WrongProtocol)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t\n", proto, i, status, metricText(res.Metrics, "plt_ms"), metricText(res.Metrics, "fcp_ms"),
				st.Requests, st.Unmatched, len(st.Origins), connText(st.Connections()), st.Bytes)
		}
	}
	tw.Flush()
	printOrigins(env.Stdout, last)
	if len(last.UnmatchedURLs) > 0 {
		fmt.Fprintf(env.Stdout, "unmatched requests of the last load: %s\n", strings.Join(last.UnmatchedURLs, ", "))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d loads failed or were invalid", failed, len(o.protos)*o.loads)
	}
	return nil
}

// agentCommand is the client agent in the client namespace, in a mount
// namespace of its own (hostmap), as the runner starts it.
func agentCommand(ctx context.Context, env *Env, tb *netns.Testbed) *exec.Cmd {
	cmd := tb.Command(context.WithoutCancel(ctx), netns.Client, env.Exe, "agent")
	hostmap.PrivateMounts(cmd.SysProcAttr)
	return cmd
}

func metricText(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%.0f", v)
	}
	return "-"
}

// connText writes connections by protocol, "6 h3".
func connText(c map[string]int) string {
	var ps []string
	for p := range c {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %s", c[p], p))
	}
	if len(out) == 0 {
		return "0"
	}
	return strings.Join(out, ", ")
}

// printOrigins prints what each origin served in a load.
func printOrigins(w io.Writer, st replay.Stats) {
	if len(st.Origins) == 0 {
		return
	}
	fmt.Fprintf(w, "\norigins of the last load (%s, %s):\n", st.Site, st.Protocol)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tADDRESS\tREQUESTS\tBYTES\tCONNECTIONS\t")
	for _, o := range st.Origins {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", o.Host, o.Addr, o.Requests, o.Bytes, connText(o.Conns))
	}
	tw.Flush()
}

// serveReplayUntil prints how to reach the replay and serves it until ctx
// ends, or runs command in the client namespace with the names mapped.
func serveReplayUntil(ctx context.Context, env *Env, tb *netns.Testbed, l *replay.Layout, info endpoint.ServerInfo, command []string, dir string) error {
	hosts := l.HostAddrs()
	fmt.Fprintf(env.Stdout, "origins (host -> address):\n%s", hostmap.Hosts(hosts))
	impls := workload.Clients(workload.ClientEnv{Getenv: env.Getenv})
	for _, name := range replayClients() {
		st, ok := peers.ClientStack(name)
		if impl := impls[name]; ok && impl.ReplayHint != nil {
			fmt.Fprintf(env.Stdout, "%s: %s\n", st.LabelFor(""), impl.ReplayHint(hosts, l.Origins(), info.SPKI))
		}
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte(info.CAPEM), 0o644); err != nil {
		return err
	}
	if len(command) == 0 {
		fmt.Fprintf(env.Stdout, "serving until interrupted (Ctrl-C); run a client with: quicbench testbed exec client --name %s -- COMMAND\n", tb.Name())
		<-ctx.Done()
		return nil
	}
	mapping := filepath.Join(dir, "hosts.json")
	b, _ := json.Marshal(hosts)
	if err := os.WriteFile(mapping, b, 0o644); err != nil {
		return err
	}
	args := append([]string{"replay-exec", "--hosts", mapping, "--"}, command...)
	cmd := tb.Command(ctx, netns.Client, env.Exe, args...)
	hostmap.PrivateMounts(cmd.SysProcAttr)
	cmd.Env = append(os.Environ(), "QUICBENCH_REPLAY_CA="+ca, "QUICBENCH_REPLAY_SPKI="+info.SPKI)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, env.Stdout, env.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &ExitError{Code: ee.ExitCode(), Err: fmt.Errorf("%s: %w", command[0], err)}
		}
		return err
	}
	return nil
}

// newReplayExecCmd is the hidden helper that maps the names (hostmap) in
// its own mount namespace and then becomes the user's command.
func newReplayExecCmd(env *Env) *cobra.Command {
	var hostsFile string
	cmd := &cobra.Command{
		Use:    "replay-exec --hosts FILE -- COMMAND...",
		Short:  "Run a command with a replay's host names mapped (internal: quicbench replay -- COMMAND)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(hostsFile)
			if err != nil {
				return err
			}
			var hosts map[string]string
			if err := json.Unmarshal(b, &hosts); err != nil {
				return fmt.Errorf("--hosts %s: %w", hostsFile, err)
			}
			if _, err := hostmap.Set(hosts); err != nil {
				return err
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return Usage(err, "the command to run in the client namespace")
			}
			return syscall.Exec(path, args, os.Environ())
		},
	}
	cmd.Flags().StringVar(&hostsFile, "hosts", "", "JSON file mapping host names to addresses")
	return cmd
}

func init() { Register("page-gen", newPageGenCmd) }

// newPageGenCmd is the hidden command that writes a built-in page's
// generated source (sites.BuildPage), before it is recorded
// (scripts/record-builtin-pages.sh).
func newPageGenCmd(env *Env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:    "page-gen NAME -o FILE.har",
		Short:  "Write the generated page a built-in recorded page is made from (internal)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ok := sites.PageShapeOf(args[0])
			if !ok {
				return Usage(fmt.Errorf("no built-in page %q", args[0]), strings.Join(sites.PageNames(), ", "))
			}
			if out == "" {
				return Usage(errors.New("no output file"), "-o FILE.har")
			}
			h, err := sites.BuildPage(s)
			if err != nil {
				return err
			}
			return har.WriteFile(out, h)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the HAR file to write")
	return cmd
}

// replayClients are the clients that load recorded pages: the registry's
// browser clients (in its order), then the built-in client.
func replayClients() []string {
	var out []string
	for _, name := range peers.Clients() {
		if st, ok := peers.ClientStack(name); ok && st.Client.Kind == peers.KindBrowser {
			out = append(out, name)
		}
	}
	return append(out, model.ClientBuiltin)
}

// addresses is "1 address" or "N addresses".
func addresses(n int) string {
	if n == 1 {
		return "1 address"
	}
	return fmt.Sprintf("%d addresses", n)
}

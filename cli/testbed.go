package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/traffic"
)

func init() { Register("testbed", newTestbedCmd) }

// defaultTestbedName is the name testbed up uses without --name.
const defaultTestbedName = "default"

func newTestbedCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testbed",
		Short: "Keep an emulated client/server network up for any tool (up, exec, down, list)",
		Long: `A testbed is a client and a server network namespace joined by quicbench's link emulator.
testbed up builds one and holds it in the foreground; in another terminal, testbed exec runs
any program in either namespace (or use ip netns exec with the printed namespace names);
testbed down, Ctrl-C or SIGTERM removes it.`,
		Example: `  quicbench testbed up --link "delay 20ms rate 50mbit"
  quicbench testbed exec server -- python3 -m http.server 8000
  quicbench testbed exec client -- curl http://10.1.2.2:8000/
  quicbench testbed down`,
	}
	cmd.AddCommand(newTestbedUpCmd(env), newTestbedExecCmd(env), newTestbedDownCmd(env), newTestbedListCmd(env))
	return cmd
}

// testbedJSON is what testbed up and list print with --json.
type testbedJSON struct {
	Event      string `json:"event,omitempty"` // "up" or "down" (testbed up)
	Name       string `json:"name"`
	PID        int    `json:"pid,omitempty"`
	Alive      *bool  `json:"alive,omitempty"`
	ClientNS   string `json:"client_ns"`
	ServerNS   string `json:"server_ns"`
	ClientAddr string `json:"client_addr"`
	ServerAddr string `json:"server_addr"`
	Up         string `json:"up"`
	Down       string `json:"down"`
	Seed       uint64 `json:"seed"`
	CC         string `json:"cc"`
	DefaultCC  string `json:"default_cc,omitempty"`
	// CCIsDefault says whether CC could be made the namespaces' default
	// (the host allows it); CCNote says, for a user, what TCP sockets in
	// the namespaces get (ccNote).
	CCIsDefault *bool             `json:"cc_is_default,omitempty"`
	CCNote      string            `json:"cc_note,omitempty"`
	Sysctls     map[string]string `json:"sysctls,omitempty"`
	UpCount     *emu.Counters     `json:"up_counters,omitempty"`
	DownCount   *emu.Counters     `json:"down_counters,omitempty"`
}

func tbJSON(tb *netns.Testbed) testbedJSON {
	up, down, seed := tb.Links()
	isDefault := tb.CC() == tb.DefaultCC()
	return testbedJSON{
		CCIsDefault: &isDefault, CCNote: ccNote(tb),
		Name: tb.Name(), PID: os.Getpid(),
		ClientNS: tb.NSName(netns.Client), ServerNS: tb.NSName(netns.Server),
		ClientAddr: tb.Addr(netns.Client).String(), ServerAddr: tb.Addr(netns.Server).String(),
		Up: up.String(), Down: down.String(), Seed: seed, CC: tb.CC(), DefaultCC: tb.DefaultCC(),
		Sysctls: tb.Sysctls(),
	}
}

func newTestbedUpCmd(env *Env) *cobra.Command {
	var (
		name                       string
		asJSON                     bool
		noOffload, noRealtime, pin bool
		competingSpec              string
	)
	cmd := &cobra.Command{
		Use:   "up [--link SPEC | --up SPEC --down SPEC] [--seed N] [--cc cubic] [--name NAME]",
		Short: "Build a testbed and hold it until Ctrl-C, SIGTERM or testbed down",
		Args:  cobra.NoArgs,
	}
	lf := AddLinkFlags(cmd)
	cmd.Flags().StringVar(&name, "name", defaultTestbedName, "testbed name (namespaces qb-NAME-c and qb-NAME-s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object when up and one (with the link counters) when removed")
	cmd.Flags().BoolVar(&noOffload, "no-offload", false, "move one wire packet per system call (no TSO/USO on the TUN devices)")
	cmd.Flags().BoolVar(&noRealtime, "no-realtime", false, "keep the emulator threads on the normal scheduler (no SCHED_FIFO)")
	cmd.Flags().BoolVar(&pin, "pin", false, "pin the emulator threads to a CPU of their own (see docs/performance.md); run server and client with the printed taskset")
	cmd.Flags().StringVar(&competingSpec, "competing", "", `background flows that share the link while the testbed is up, server to client, e.g. "tcp cc cubic count 2; udp rate 5mbit" (docs/plan-format.md, "Competing traffic"); their goodput is printed when the testbed is removed`)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		up, down, err := lf.Links()
		if err != nil {
			return err
		}
		spec, err := competing.Parse(competingSpec)
		if err != nil {
			return Usage(fmt.Errorf("--competing: %w", err), "clauses: tcp [cc NAME] [count N]; quic [count N]; udp rate RATE [count N]; web [size SIZE] [off DURATION] [cc NAME] [count N]")
		}
		if os.Geteuid() != 0 {
			return &ExitError{Code: ExitEnv, Err: errors.New("testbed up needs root: other processes must be able to enter its namespaces (/run/netns)"),
				Hint: "as an ordinary user, quicbench emulate runs a command behind the link (rootless)"}
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
		defer stop()
		tb, err := netns.New(ctx, netns.Config{Name: name, Up: up, Down: down, Seed: lf.Seed, CC: lf.CC,
			Persist: true, NoOffload: noOffload, NoRealtime: noRealtime, Pin: pin})
		if err != nil {
			return testbedError(err)
		}
		defer tb.Close()
		if asJSON {
			j := tbJSON(tb)
			j.Event = "up"
			writeJSONLine(env.Stdout, j)
		} else {
			printTestbed(env.Stdout, tb)
		}
		fmt.Fprintf(env.Stderr, "quicbench testbed: %s\n", ccNote(tb))
		var flows *traffic.Session
		if len(spec.Flows) > 0 {
			if flows, err = traffic.Start(ctx, tb, spec.Flows, traffic.Options{Seed: lf.Seed}); err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("competing flows: %w", err)}
			}
			fmt.Fprintf(env.Stderr, "quicbench testbed: %d competing flow(s) running, server to client\n", spec.Count())
		}
		<-ctx.Done()
		if flows != nil {
			took := time.Since(flows.Started())
			for _, f := range flows.Stop() {
				line := fmt.Sprintf("competing %s: %d bytes, %.2f Mbit/s", f.Label, f.Bytes, float64(f.Bytes)*8/took.Seconds()/1e6)
				if f.Err != "" {
					line += " (failed: " + f.Err + ")"
				}
				fmt.Fprintln(env.Stderr, line)
			}
		}
		upC, downC := tb.Counters()
		if err := tb.Close(); err != nil {
			return err
		}
		if asJSON {
			j := tbJSON(tb)
			j.Event, j.UpCount, j.DownCount, j.Sysctls, j.CCIsDefault, j.CCNote = "down", &upC, &downC, nil, nil, ""
			writeJSONLine(env.Stdout, j)
		} else {
			fmt.Fprintf(env.Stdout, "testbed %q removed\n  up   %s\n  down %s\n", tb.Name(), counterLine(upC), counterLine(downC))
		}
		return nil
	}
	return cmd
}

func writeJSONLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

func printTestbed(w io.Writer, tb *netns.Testbed) {
	up, down, seed := tb.Links()
	fmt.Fprintf(w, "testbed %q is up; Ctrl-C or `quicbench testbed down --name %s` removes it\n", tb.Name(), tb.Name())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  client\tnamespace %s\taddress %s\n", tb.NSName(netns.Client), tb.Addr(netns.Client))
	fmt.Fprintf(tw, "  server\tnamespace %s\taddress %s\n", tb.NSName(netns.Server), tb.Addr(netns.Server))
	tw.Flush()
	fmt.Fprintf(w, "  up   (client->server): %s\n  down (server->client): %s\n", up.String(), down.String())
	fmt.Fprintf(w, "  seed %d, TCP congestion control %s across the link (namespace default %s)\n", seed, tb.CC(), tb.DefaultCC())
	if p, ok := tb.Pinning(); ok {
		fmt.Fprintf(w, "  pinned: emulator on CPU %s; run the server under taskset -c %s, the client under taskset -c %s\n",
			cpuListString(p.Emulator), cpuListString(p.Server), cpuListString(p.Client))
	}
	fmt.Fprintf(w, "run commands with: quicbench testbed exec client|server --name %s -- CMD...\n", tb.Name())
	fmt.Fprintf(w, "               or: ip netns exec %s CMD...\n", tb.NSName(netns.Client))
}

func counterLine(c emu.Counters) string {
	s := fmt.Sprintf("%d packets in, %d out; dropped: %d loss, %d queue, %d corrupt, %d blackout; %d duplicated, %d reordered",
		c.PacketsIn, c.PacketsOut, c.DropLoss, c.DropQueue, c.DropCorrupt, c.DropOff, c.Duplicated, c.Reordered)
	if c.DropMTU > 0 {
		s += fmt.Sprintf("; %d above the MTU", c.DropMTU)
	}
	if c.PacketsOut > 0 && c.QueueDelayMaxNs > 0 {
		s += fmt.Sprintf("; queue delay mean %v max %v",
			time.Duration(c.MeanQueueDelayNs()).Round(time.Microsecond), time.Duration(c.QueueDelayMaxNs).Round(time.Microsecond))
	}
	return s
}

// resolveTestbed finds the persistent testbed for exec and down: --name, or
// the only one running, or "default".
func resolveTestbed(name string) (netns.Info, error) {
	if name == "" {
		infos, err := netns.List()
		if err != nil {
			return netns.Info{}, err
		}
		switch len(infos) {
		case 0:
			return netns.Info{}, &ExitError{Code: ExitFailure, Err: errors.New("no testbed is up"),
				Hint: "start one with: quicbench testbed up --link SPEC"}
		case 1:
			return infos[0], nil
		}
		var names []string
		for _, i := range infos {
			names = append(names, i.Name)
		}
		return netns.Info{}, Usage(fmt.Errorf("%d testbeds are up (%s): say which with --name", len(infos), strings.Join(names, ", ")), "")
	}
	info, err := netns.Lookup(name)
	if errors.Is(err, netns.ErrNotFound) {
		return info, &ExitError{Code: ExitFailure, Err: err, Hint: "list them with: quicbench testbed list"}
	}
	if err != nil {
		return info, Usage(err, "")
	}
	return info, nil
}

func newTestbedExecCmd(env *Env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "exec client|server [--name NAME] -- CMD [ARG...]",
		Short: "Run a command in a testbed's client or server namespace; exits with its status",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return Usage(errors.New("want client or server, then -- and the command"), "e.g. quicbench testbed exec client -- curl http://10.1.2.2/")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the only testbed up)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		side, err := netns.ParseSide(args[0])
		if err != nil {
			return Usage(err, "")
		}
		info, err := resolveTestbed(name)
		if err != nil {
			return err
		}
		if !info.Alive() {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("testbed %q: its quicbench process (pid %d) is gone", info.Name, info.PID),
				Hint: "remove what it left with: quicbench cleanup"}
		}
		c := info.Command(cmd.Context(), side, args[1], args[2:]...)
		c.Env = append(os.Environ(), testbedEnv(info.Name, info.ClientAddr.String(), info.ServerAddr.String(), info.CC)...)
		return runChild(env, args[1], c)
	}
	return cmd
}

// testbedEnv are the variables commands in a testbed get; cc is the
// testbed's congestion control (ccEnv).
func testbedEnv(name, client, server, cc string) []string {
	return []string{"QUICBENCH_TESTBED=" + name, "QUICBENCH_CLIENT_ADDR=" + client, "QUICBENCH_SERVER_ADDR=" + server, ccEnv + "=" + cc}
}

// ccEnv is the variable through which testbed exec and emulate tell the
// commands they run the testbed's TCP congestion control; quicbench serve
// and fetch take it as the default of --cc.
const ccEnv = "QUICBENCH_CC"

// ccFlag returns the congestion control a command's sockets should ask
// for: --cc when given, else $QUICBENCH_CC (set inside a testbed), else ""
// (the system's). A --cc that differs from the testbed's gets a note on
// stderr: the testbed's routes override it on connections across the link.
func ccFlag(env *Env, cmd *cobra.Command, cc string) string {
	var tbCC string
	if env.Getenv != nil {
		tbCC = env.Getenv(ccEnv)
	}
	if !cmd.Flags().Changed("cc") {
		return tbCC
	}
	if tbCC != "" && cc != tbCC {
		fmt.Fprintf(env.Stderr, "note: --cc %s: this testbed's routes give every TCP connection across its link %s (%s), whatever a socket asks for; %s applies only to connections inside the namespace\n",
			cc, tbCC, ccEnv, cc)
	}
	return cc
}

// ccNote says what congestion control the TCP sockets in tb's namespaces
// get: the testbed's on every connection across the link, and whether the
// namespaces could default to it.
func ccNote(tb *netns.Testbed) string {
	if hint := tb.RestrictedCCHint(); hint != "" {
		return "TCP congestion control " + tb.CC() + ": " + hint
	}
	return fmt.Sprintf("TCP congestion control %s: the namespaces' default, and carried by the testbed's routes, so every TCP connection between the client and the server namespace runs %s, even one whose program asks for another algorithm",
		tb.CC(), tb.CC())
}

// runChild runs c (program name) with the command's standard I/O, asks it
// to stop with SIGTERM when the command is interrupted, and turns its exit
// status into quicbench's (128+N when killed by signal N).
func runChild(env *Env, name string, c *exec.Cmd) error {
	c.Stdin, c.Stdout, c.Stderr = env.Stdin, env.Stdout, env.Stderr
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &ExitError{Code: code, Err: fmt.Errorf("%s: %v", name, ee), Silent: true}
	}
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", name, err)}
}

func newTestbedDownCmd(env *Env) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down [--name NAME]",
		Short: "Remove a testbed started with testbed up",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: the only testbed up)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		info, err := resolveTestbed(name)
		if err != nil {
			return err
		}
		if err := netns.Down(cmd.Context(), info.Name); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "testbed %q removed\n", info.Name)
		return nil
	}
	return cmd
}

func newTestbedListCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the testbeds started with testbed up (and stale ones)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		infos, err := netns.List()
		if err != nil {
			return err
		}
		if asJSON {
			out := []testbedJSON{}
			for _, i := range infos {
				alive := i.Alive()
				out = append(out, testbedJSON{Name: i.Name, PID: i.PID, Alive: &alive, ClientNS: i.ClientNS, ServerNS: i.ServerNS,
					ClientAddr: i.ClientAddr.String(), ServerAddr: i.ServerAddr.String(), Up: i.Up, Down: i.Down, Seed: i.Seed, CC: i.CC, DefaultCC: i.DefaultCC})
			}
			writeJSONLine(env.Stdout, out)
			return nil
		}
		if len(infos) == 0 {
			fmt.Fprintln(env.Stdout, "no testbed is up")
			return nil
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPID\tSTATE\tCLIENT\tSERVER\tUP\tDOWN")
		for _, i := range infos {
			state := "up"
			if !i.Alive() {
				state = "stale (run quicbench cleanup)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s %s\t%s %s\t%s\t%s\n", i.Name, i.PID, state, i.ClientNS, i.ClientAddr, i.ServerNS, i.ServerAddr, i.Up, i.Down)
		}
		return tw.Flush()
	}
	return cmd
}

func cpuListString(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

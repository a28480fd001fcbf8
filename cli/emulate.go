package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/netns"
)

func init() { Register("emulate", newEmulateCmd) }

func newEmulateCmd(env *Env) *cobra.Command {
	var (
		name, server          string
		noOffload, noRealtime bool
	)
	cmd := &cobra.Command{
		Use:   "emulate [--link SPEC | --up SPEC --down SPEC] [--server CMD] -- CMD [ARG...]",
		Short: "Run a command behind an emulated link (like mahimahi's shells); exits with its status",
		Long: `emulate builds a testbed, runs CMD in its client namespace for CMD's lifetime and removes the
testbed when CMD exits. Whatever CMD reaches at the server address crosses the emulated link.
It prints the server-side address (and the testbed name) on standard error, and passes them to
CMD (and to the --server command) as QUICBENCH_SERVER_ADDR, QUICBENCH_CLIENT_ADDR and
QUICBENCH_TESTBED. Run a server there with --server, or from another terminal with
quicbench testbed exec server --name NAME -- CMD.`,
		Example: `  quicbench emulate --link "delay 40ms rate 20mbit" --server "python3 -m http.server 8000" -- \
      sh -c 'sleep 1; curl -o /dev/null http://$QUICBENCH_SERVER_ADDR:8000/'
  quicbench emulate --down "rate 10mbit loss 1%" --up "rate 2mbit" -- bash`,
		Args: cobra.MinimumNArgs(1),
	}
	lf := AddLinkFlags(cmd)
	cmd.Flags().StringVar(&name, "name", "", "testbed name (default: emu-PID)")
	cmd.Flags().StringVar(&server, "server", "", "shell command to run in the server namespace while CMD runs (stopped afterwards)")
	cmd.Flags().BoolVar(&noOffload, "no-offload", false, "move one wire packet per system call (no TSO/USO on the TUN devices)")
	cmd.Flags().BoolVar(&noRealtime, "no-realtime", false, "keep the emulator threads on the normal scheduler (no SCHED_FIFO)")
	cmd.Flags().SetInterspersed(false)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		up, down, err := lf.Links()
		if err != nil {
			return err
		}
		persist := true
		switch {
		case netns.InRootless():
			persist = false // an ordinary user has no /run/netns
		case os.Geteuid() != 0:
			return reexecRootless(cmd, env)
		}
		if name == "" {
			name = "emu-" + strconv.Itoa(os.Getpid())
		}
		ctx := cmd.Context()
		tb, err := netns.New(ctx, netns.Config{Name: name, Up: up, Down: down, Seed: lf.Seed, CC: lf.CC,
			Persist: persist, NoOffload: noOffload, NoRealtime: noRealtime})
		if err != nil {
			return testbedError(err)
		}
		defer tb.Close()
		vars := append(os.Environ(), testbedEnv(tb.Name(), tb.Addr(netns.Client).String(), tb.Addr(netns.Server).String(), tb.CC())...)
		fmt.Fprintf(env.Stderr, "quicbench emulate: server address %s (client %s), up %q, down %q, seed %d; testbed %q\n",
			tb.Addr(netns.Server), tb.Addr(netns.Client), up.String(), down.String(), lf.Seed, tb.Name())
		if hint := tb.RestrictedCCHint(); hint != "" {
			fmt.Fprintf(env.Stderr, "quicbench emulate: TCP congestion control %s: %s\n", tb.CC(), hint)
		}
		// The server command and CMD share standard error.
		cenv := *env
		cenv.Stderr = shareWriter(env.Stderr)
		var srv *exec.Cmd
		if server != "" {
			srv = tb.Command(ctx, netns.Server, "/bin/sh", "-c", server)
			srv.Env = vars
			srv.Stdout, srv.Stderr = cenv.Stderr, cenv.Stderr
			// Its own process group, so that stopping it reaches the
			// programs the shell started too.
			srv.SysProcAttr.Setpgid = true
			srv.Cancel = func() error { return syscall.Kill(-srv.Process.Pid, syscall.SIGTERM) }
			if err := srv.Start(); err != nil {
				return fmt.Errorf("--server: %w", err)
			}
		}
		c := tb.Command(ctx, netns.Client, args[0], args[1:]...)
		c.Env = vars
		runErr := runChild(&cenv, args[0], c)
		if srv != nil {
			syscall.Kill(-srv.Process.Pid, syscall.SIGTERM)
			if err := srv.Wait(); err != nil && !stoppedBySIGTERM(err) {
				fmt.Fprintf(env.Stderr, "quicbench emulate: --server command: %v\n", err)
			}
		}
		upC, downC := tb.Counters()
		fmt.Fprintf(env.Stderr, "quicbench emulate: up   %s\nquicbench emulate: down %s\n", counterLine(upC), counterLine(downC))
		if err := tb.Close(); err != nil && runErr == nil {
			return err
		}
		return runErr
	}
	return cmd
}

// stoppedBySIGTERM reports whether a command's Wait error is its death by
// the SIGTERM emulate sent.
func stoppedBySIGTERM(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}

// reexecRootless runs this quicbench command again inside a new user and
// network namespace, where the calling user is root, when unprivileged user
// namespaces are allowed.
func reexecRootless(cmd *cobra.Command, env *Env) error {
	if err := netns.UserNamespaceSupport(); err != nil {
		return &ExitError{Code: ExitEnv, Err: fmt.Errorf("%s needs root, or unprivileged user namespaces: %w", cmd.CommandPath(), err),
			Hint: "run as root; quicbench doctor explains what this machine allows"}
	}
	c := netns.RootlessCommand(cmd.Context(), env.Exe, env.Args...)
	c.Stdin, c.Stdout, c.Stderr = env.Stdin, env.Stdout, env.Stderr
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &ExitError{Code: code, Err: fmt.Errorf("rootless %s: exit status %d", cmd.CommandPath(), code), Silent: true}
	}
	if err != nil {
		return &ExitError{Code: ExitEnv, Err: fmt.Errorf("rootless re-execution: %w", err)}
	}
	return nil
}

// shareWriter makes w safe for several commands at once. A file is passed
// to children as is (they write to it directly, and see a terminal when it
// is one); any other writer gets a lock around it.
func shareWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &syncWriter{w: w}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

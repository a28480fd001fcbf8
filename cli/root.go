// Package cli implements quicbench's command line: one file per subcommand,
// each registering itself with Register from an init function. Commands
// receive an *Env instead of reaching for os.Stdout, os.Exit or signals, so
// that they can be run end to end in tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/spf13/cobra"
)

// Env carries the process state a command may use.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Args   []string // arguments after the program name
	// Getenv reads an environment variable (os.Getenv in main).
	Getenv func(string) string
	// Exe is the path of the quicbench executable, used to start helper
	// processes (server and client agents) inside namespaces.
	Exe string
}

// ExitError is an error that carries a process exit code and an optional
// hint for the user.
type ExitError struct {
	Code int
	Err  error
	Hint string
	// Silent exits with Code without printing Err: for the exit status of
	// a child command, which has said what it had to say.
	Silent bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed (e.g. calibrate out of tolerance)
	ExitUsage   = 2 // bad input: flags, plan, link spec, trace, URL
	ExitEnv     = 3 // the machine cannot do it (no root, no TUN, missing chromium)
	ExitSignal  = 130
)

// Usage wraps err as a bad-input error (exit code 2).
func Usage(err error, hint string) error { return &ExitError{Code: ExitUsage, Err: err, Hint: hint} }

type commandFactory struct {
	name string
	make func(*Env) *cobra.Command
}

var factories []commandFactory

// Register adds a subcommand. It is called from init functions, one per file.
func Register(name string, make func(*Env) *cobra.Command) {
	factories = append(factories, commandFactory{name, make})
}

// NewRoot builds the root command with every registered subcommand.
func NewRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "quicbench",
		Short: "Measure when and why QUIC (HTTP/3) beats TCP (HTTP/1.1, HTTP/2), over an emulated network",
		Long: `quicbench builds an emulated network in Linux namespaces, runs real protocol
stacks across it, repeats every measurement with statistical care and writes a report.

Start with:  quicbench run --plan quick   (then open the report it writes)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usage(err, "see --help") })
	fs := append([]commandFactory(nil), factories...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].name < fs[j].name })
	for _, f := range fs {
		root.AddCommand(f.make(env))
	}
	return root
}

// Main runs the command line and returns the process exit code.
func Main(env *Env) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, env)
}

// Run runs the command line under ctx and returns the exit code.
func Run(ctx context.Context, env *Env) int {
	root := NewRoot(env)
	root.SetArgs(env.Args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Silent {
		return ee.Code
	}
	fmt.Fprintf(env.Stderr, "quicbench: %v\n", err)
	if errors.As(err, &ee) {
		if ee.Hint != "" {
			fmt.Fprintf(env.Stderr, "hint: %s\n", ee.Hint)
		}
		return ee.Code
	}
	if ctx.Err() != nil {
		return ExitSignal
	}
	return ExitFailure
}

package contract

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/internal/safefs"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
)

// probeWindow is how long a probe waits for a command to say it does not
// support a testcase: the quic-interop-runner's endpoints exit 127 at once.
const probeWindow = 3 * time.Second

// Probe runs a contract stack's command once as role with testcase, in an
// empty network namespace of its own (so that nothing it does reaches any
// network) and a root of its own, and reports whether it supports the
// testcase: it does not when it exits with status 127 within a few
// seconds; a command that runs on (a server) or fails otherwise (a client
// that finds no server) does. exe is quicbench itself (Enter).
func Probe(ctx context.Context, exe string, st *peers.Stack, role, testcase string) (supported bool, err error) {
	ns, err := netns.NewNamespace()
	if err != nil {
		return false, fmt.Errorf("contract probe: a namespace: %w", err)
	}
	defer ns.Close()
	base, err := os.MkdirTemp("", "qb-contract-probe-")
	if err != nil {
		return false, err
	}
	defer func() { _ = safefs.RemoveAll(base) }() // never through a mount point
	m, err := dirs(base)
	if err != nil {
		return false, err
	}
	var requests []string
	port := 0
	if role == peers.RoleServer {
		port = peers.ContractPort
	} else {
		requests = []string{"https://192.0.2.1:443/probe"} // TEST-NET-1: nothing answers
	}
	cmd, err := Command(exe, Spec{
		Command: st.Command, Env: Env(role, testcase, requests, port),
		Root: filepath.Join(base, "root"), Mounts: m, ReadOnly: []string{WWW, Certs},
		NetNS: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd()),
	})
	if err != nil {
		return false, err
	}
	var out tail
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(probeWindow):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return true, nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return false, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == ExitUnsupported {
		return false, nil
	}
	if err != nil && !errors.As(err, &ee) {
		return false, fmt.Errorf("%s: %v: %s", st.Command, err, out.String())
	}
	return true, nil
}

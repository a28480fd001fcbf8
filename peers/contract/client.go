package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/internal/safefs"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

func init() { workload.ContractRunner = runClient }

// runClient runs a contract stack's client: its command with ROLE=client,
// testcase and REQUESTS (urls), in the calling process's network
// namespace (the client's) and a mount namespace of its own, until it
// exits or timeout passes. It returns the directory it downloaded to.
func runClient(ctx context.Context, st *peers.Stack, testcase string, urls []string, timeout time.Duration) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	base, err := os.MkdirTemp("", "qb-contract-client-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = safefs.RemoveAll(base) } // never through a mount point
	m, err := dirs(base)
	if err != nil {
		return "", cleanup, err
	}
	cmd, err := Command(exe, Spec{
		Command: st.Command, Env: Env("client", testcase, urls, 0),
		Root: filepath.Join(base, "root"), Mounts: m, ReadOnly: []string{WWW, Certs},
	})
	if err != nil {
		return "", cleanup, err
	}
	var out tail
	cmd.Stdout, cmd.Stderr = &out, &out
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return "", cleanup, fmt.Errorf("%s client: %w", st.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return m[Downloads], cleanup, fmt.Errorf("%s client: no end after %v: %w (%s)", st.Name, timeout, ctx.Err(), out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return m[Downloads], cleanup, nil
	case errors.As(err, &ee) && ee.ExitCode() == ExitUnsupported:
		return m[Downloads], cleanup, &UnsupportedError{Stack: st.Name, Role: "client", Testcase: testcase}
	}
	return m[Downloads], cleanup, fmt.Errorf("%s client: %v: %s", st.Name, err, out.String())
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 4096 {
		rest := t.b.Bytes()[t.b.Len()-4096:]
		t.b = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(t.b.String()) }

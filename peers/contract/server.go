package contract

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/peers"
)

func init() { endpoint.RegisterCommandLauncher(launch) }

// UnsupportedError is a contract command's exit status 127: it does not
// support the testcase.
type UnsupportedError struct {
	Stack, Role, Testcase string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s does not support testcase %s as %s (exit status %d)", e.Stack, e.Testcase, e.Role, ExitUnsupported)
}

// dirs makes the contract's directories under base and returns them by
// the path they are mounted at.
func dirs(base string) (map[string]string, error) {
	m := map[string]string{}
	for _, at := range []string{WWW, Downloads, Certs, Logs} {
		d := filepath.Join(base, filepath.Base(at))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		m[at] = d
	}
	if err := os.MkdirAll(filepath.Join(m[Logs], "qlog"), 0o755); err != nil {
		return nil, err
	}
	return m, os.MkdirAll(filepath.Join(base, "root"), 0o755)
}

// launch runs a contract stack's server: the files its cells request in
// /www (endpoint.Materialize), the server's certificate as
// /certs/cert.pem and /certs/priv.key, the command run with ROLE=server
// and its testcase, listening on port 443; it returns once a QUIC
// handshake succeeds there.
func launch(ctx context.Context, p *endpoint.PeerServer) error {
	st, cfg := p.Stack(), p.Config()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	m, err := dirs(p.Dir())
	if err != nil {
		return err
	}
	if err := endpoint.Materialize(m[WWW], cfg.Paths); err != nil {
		return err
	}
	certFile, keyFile := p.CertFiles()
	for src, dst := range map[string]string{certFile: "cert.pem", keyFile: "priv.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(m[Certs], dst), b, 0o600); err != nil {
			return err
		}
	}
	port := peers.ContractPort
	if cfg.Port != 0 && cfg.Port != port {
		return fmt.Errorf("a contract server listens on port %d, not %d", port, cfg.Port)
	}
	testcase := peers.Testcase(st.Server.Protocols[0])
	cmd, err := Command(exe, Spec{
		Command: st.Command, Env: Env("server", testcase, nil, port),
		Root: filepath.Join(p.Dir(), "root"), Mounts: m, ReadOnly: []string{WWW, Certs},
	})
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = p.Stderr(nil), p.Stderr(nil)
	if err := p.Start(cmd); err != nil {
		return err
	}
	p.SetInfo(port, st.Name+" (contract)", map[string]string{"testcase": testcase, "command": st.Command})
	if cfg.KeyLogFile != "" {
		p.OnClose(func() { _ = appendFile(filepath.Join(m[Logs], "keys.log"), cfg.KeyLogFile) })
	}
	if cfg.QlogDir != "" {
		p.OnClose(func() { _ = copyTree(filepath.Join(m[Logs], "qlog"), cfg.QlogDir) })
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	return waitServer(ctx, p, host+":"+strconv.Itoa(port), st.Name, testcase)
}

// waitServer waits until the server completes a QUIC handshake at addr,
// or fails with what its exit says (127: the testcase is unsupported).
func waitServer(ctx context.Context, p *endpoint.PeerServer, addr, name, testcase string) error {
	conf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{h3.ALPN}} //nolint:gosec // a readiness probe of the testbed's own server
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := h3.PeerCertificates(hctx, addr, conf)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-p.Exited():
			if code := p.ExitCode(); code == ExitUnsupported {
				return &UnsupportedError{Stack: name, Role: "server", Testcase: testcase}
			}
			return errors.New("exited before it listened")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no QUIC handshake on %s after 30 s: %v", addr, last)
}

// appendFile appends src's content to dst (a key log).
func appendFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// copyTree copies the regular files under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

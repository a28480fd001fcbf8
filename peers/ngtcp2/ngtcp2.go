// Package ngtcp2 is the ngtcp2 stack (stack.yaml beside this file): the
// example HTTP/3 server and client of ngtcp2 0.12 (C, GnuTLS, nghttp3) as
// Debian ships them (gtlsserver, gtlsclient), a third QUIC stack beside
// quic-go and aioquic.
//
// The server serves files: `quicbench serve --impl ngtcp2` writes the paths
// its cells request (endpoint.Materialize) and runs gtlsserver on them with
// the plan's congestion control (--cc), quic-go's flow-control windows and
// a qlog per connection, from which ConnStats reads each connection's
// statistics. The client is a fetch client: every sample runs gtlsclient
// once and turns its qlog into the built-in client's record (timelines
// from the STREAM frames, to ngtcp2's millisecond), so the test's metrics
// come from the same code as the built-in client's. Neither program reports
// its congestion control: the window's reductions (Cubic keeps 0.7 of it,
// NewReno half) tell it whenever something was lost.
package ngtcp2

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Name is the stack's name in the registry.
const Name = "ngtcp2"

// The programs and the Debian packages that install them.
const (
	serverProgram = "gtlsserver"
	clientProgram = "gtlsclient"
	serverPackage = "ngtcp2-server"
	clientPackage = "ngtcp2-client"
)

func init() {
	peers.Provide(Name, peers.Hooks{Check: check})
	endpoint.RegisterPeer(Name, launch)
	workload.RegisterClient(Name, newClient)
}

// find returns the path of program and the version of the Debian package
// that installs it ("0.12.1", or "" when dpkg does not know it).
func find(ctx context.Context, program, pkg string) (path, version string, err error) {
	path, err = exec.LookPath(program)
	if err != nil {
		if _, e := os.Stat("/usr/sbin/" + program); e == nil {
			path, err = "/usr/sbin/"+program, nil // root's PATH may lack sbin
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: %s is not on PATH: install it with `apt-get install %s` (or `bash scripts/setup.sh`)", peers.ErrNotInstalled, program, pkg)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", pkg).Output(); err == nil {
		version, _, _ = strings.Cut(strings.TrimSpace(string(b)), "+")
	}
	return path, version, nil
}

func check(ctx context.Context, role string) (version, detail string, err error) {
	program, pkg := serverProgram, serverPackage
	if role == peers.RoleClient {
		program, pkg = clientProgram, clientPackage
	}
	path, v, err := find(ctx, program, pkg)
	if err != nil {
		return "", "", err
	}
	if v == "" {
		return "ngtcp2", path + " (version unknown: not installed by dpkg)", nil
	}
	return "ngtcp2 " + v, path, nil
}

// Flow control as quic-go's largest auto-tuned windows (ngtcp2's own
// defaults, 1 MiB per connection and 256 KiB per stream, cap goodput on a
// long path), and streams enough for a page of many objects.
var windowFlags = []string{
	"--max-data=" + strconv.Itoa(h3.ConnWindow), "--max-window=" + strconv.Itoa(h3.ConnWindow),
	"--max-stream-window=" + strconv.Itoa(h3.StreamWindow),
	"--max-streams-bidi=1000",
}

// launch writes the files the cells request and runs gtlsserver on them.
func launch(ctx context.Context, p *endpoint.PeerServer) error {
	cfg := p.Config()
	path, version, err := find(ctx, serverProgram, serverPackage)
	if err != nil {
		return err
	}
	www := filepath.Join(p.Dir(), "www")
	if err := endpoint.Materialize(www, cfg.Paths); err != nil {
		return err
	}
	for name, dir := range cfg.Sites {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(www, "site"), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(abs, filepath.Join(www, "site", name)); err != nil {
			return err
		}
	}
	port, err := p.FreePort()
	if err != nil {
		return err
	}
	qlogs := filepath.Join(p.Dir(), "qlog")
	if err := os.MkdirAll(qlogs, 0o755); err != nil {
		return err
	}
	certFile, keyFile := p.CertFiles()
	host := cfg.Host
	if host == "" {
		host = "*"
	}
	args := append([]string{"-q", "-d", www, "--qlog-dir", qlogs, "--cc=" + p.QUICCC(),
		"--max-stream-data-bidi-remote=" + strconv.Itoa(h3.StreamWindow)}, windowFlags...)
	args = append(args, host, strconv.Itoa(port), keyFile, certFile)
	cmd := exec.Command(path, args...)
	cmd.Env = os.Environ()
	if cfg.KeyLogFile != "" {
		cmd.Env = append(cmd.Env, "SSLKEYLOGFILE="+cfg.KeyLogFile) // GnuTLS writes it
	}
	cmd.Stdout, cmd.Stderr = p.Stderr(nil), p.Stderr(nil)
	if err := p.Start(cmd); err != nil {
		return err
	}
	v := "ngtcp2"
	if version != "" {
		v += " " + version
	}
	p.SetInfo(port, v, map[string]string{
		"cc": p.QUICCC(), "max_data": strconv.Itoa(h3.ConnWindow), "max_stream_data": strconv.Itoa(h3.StreamWindow),
		"qlog": "per connection (statistics)",
	})
	book := &qlogBook{dir: qlogs, claimed: map[string]bool{}, cc: p.QUICCC()}
	if err := waitQUIC(ctx, p, cfg.Host, port); err != nil {
		return err
	}
	book.claimAll() // the readiness probe's connection is nobody's sample
	p.SetStatsSource(book.stats)
	if cfg.QlogDir != "" {
		// the user's qlog directory gets a copy of each connection's
		p.OnClose(func() { _ = copyDir(qlogs, cfg.QlogDir) })
	}
	return nil
}

// waitQUIC waits until the server completes a QUIC handshake, its process
// exits, ctx ends or 20 s pass.
func waitQUIC(ctx context.Context, p *endpoint.PeerServer, host string, port int) error {
	if host == "" {
		host = "127.0.0.1"
	}
	addr := host + ":" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := h3.PeerCertificates(hctx, addr, insecureProbe())
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-p.Exited():
			return errors.New("exited before it listened")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no QUIC handshake on %s after 20 s: %v", addr, last)
}

// qlogBook hands out the statistics of the server's connections from its
// qlog files (named by the server's connection ID). ngtcp2's qlog does not
// say the client's address, so a connection is matched by order: the
// finished qlog that no earlier request claimed. When several finished at
// once they cannot be told apart, and none is given.
type qlogBook struct {
	dir     string
	cc      string
	mu      sync.Mutex
	claimed map[string]bool
}

func (b *qlogBook) claimAll() {
	ents, _ := os.ReadDir(b.dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range ents {
		b.claimed[e.Name()] = true
	}
}

// stats waits (until ctx ends) for one finished, unclaimed qlog and returns
// its statistics.
func (b *qlogBook) stats(ctx context.Context, kind, addr string) (model.TransportStats, error) {
	if kind != "quic" {
		return model.TransportStats{}, fmt.Errorf("ngtcp2 serves QUIC only, no %s connection", kind)
	}
	for {
		b.mu.Lock()
		var done []string
		var traces []*trace
		ents, err := os.ReadDir(b.dir)
		if err != nil {
			b.mu.Unlock()
			return model.TransportStats{}, err
		}
		for _, e := range ents {
			if b.claimed[e.Name()] {
				continue
			}
			t, err := readQlog(filepath.Join(b.dir, e.Name()))
			if err != nil || !t.closed {
				continue
			}
			done = append(done, e.Name())
			traces = append(traces, t)
		}
		switch len(done) {
		case 1:
			b.claimed[done[0]] = true
			b.mu.Unlock()
			return traces[0].transport("server", b.cc), nil
		case 0:
		default:
			for _, n := range done {
				b.claimed[n] = true
			}
			b.mu.Unlock()
			return model.TransportStats{}, fmt.Errorf("%d ngtcp2 connections ended at once and its qlog does not say their clients' addresses: their statistics cannot be told apart", len(done))
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return model.TransportStats{}, fmt.Errorf("no finished ngtcp2 connection for %s: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func readQlog(path string) (*trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseQlog(f)
}

// copyDir copies the files of src into dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

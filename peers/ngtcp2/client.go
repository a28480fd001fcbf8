package ngtcp2

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

func insecureProbe() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{h3.ALPN}} //nolint:gosec // a readiness probe of our own server
}

func newClient(workload.ClientEnv) workload.ClientImpl {
	return workload.ClientImpl{Fetch: fetch}
}

// killGrace is how long past the sample's timeout gtlsclient may take
// before it is killed (it gives up on its own at --timeout).
const killGrace = 5 * time.Second

// fetch runs spec (a download, ttfb or multiplex sample over h3) with
// gtlsclient against req's target, in the calling process's network
// namespace and in a process group of its own, and turns its qlog into the
// built-in client's record: one connection whose start is the qlog's first
// event, handshake its HANDSHAKE_DONE, and one request per URL, from the
// first STREAM frame sent on its stream to the FIN received on it. The
// bodies it downloads are checked: every one of the size asked, /bytes
// bodies byte for byte. gtlsclient does not check the server's
// certificate (ngtcp2's example client), so the sample says so nowhere:
// the server is the testbed's.
func fetch(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
	fail := func(err error) (*endpoint.FetchResult, map[string]float64, error) {
		return nil, nil, fmt.Errorf("ngtcp2 client: %w", err)
	}
	switch {
	case spec.Proto != model.ProtoH3:
		return fail(fmt.Errorf("speaks h3 only, not %s", spec.Proto))
	case spec.Resume || spec.ZeroRTT || spec.Page || spec.Warm || spec.Upload > 0:
		return fail(errors.New("makes fresh requests of files only: no resumed or 0-RTT handshakes, pages, warm connections or uploads"))
	case len(spec.Paths) == 0:
		return fail(errors.New("no paths to request"))
	}
	for _, p := range spec.Paths {
		// it reports no status: a body is known good only by its size
		// and content
		if !strings.HasPrefix(p, "/bytes/") || strings.Count(p, "/") != 2 {
			return fail(fmt.Errorf("requests /bytes/N only (it reports no response status, so only a body of known size and content can be checked), not %s", p))
		}
	}
	t := req.Target
	if t.Host == "" || t.Port <= 0 {
		return fail(fmt.Errorf("target %q port %d: want a host and a port", t.Host, t.Port))
	}
	repeat := max(spec.Repeat, 1)
	paths := make([]string, 0, len(spec.Paths)*repeat)
	for i := range repeat {
		for _, p := range spec.Paths {
			if repeat > 1 {
				// distinct names for the downloaded files
				p += fmt.Sprintf("%sqb=%d", map[bool]string{true: "&", false: "?"}[strings.Contains(p, "?")], i)
			}
			paths = append(paths, p)
		}
	}
	if spec.Parallel > 0 && spec.Parallel < len(paths) {
		return fail(fmt.Errorf("requests all %d paths at once; it cannot keep only %d in flight", len(paths), spec.Parallel))
	}
	prog, _, err := find(ctx, clientProgram, clientPackage)
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "qb-ngtcp2-client-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	dl, qlog := filepath.Join(dir, "downloads"), filepath.Join(dir, "client.qlog")
	if err := os.Mkdir(dl, 0o755); err != nil {
		return fail(err)
	}
	st, _ := peers.ClientStack(Name)
	cc, _ := st.Client.CC.QUICFor(cmp.Or(req.CC, model.DefaultCC))
	limit := cmp.Or(spec.Timeout, endpoint.DefaultTimeout)
	args := append([]string{"-q", "--exit-on-all-streams-close", "--download", dl, "--qlog-file", qlog, "--cc=" + cc,
		"--timeout=" + strconv.Itoa(int(cmp.Or(spec.IdleTimeout, endpoint.DefaultIdleTimeout).Milliseconds())) + "ms",
		"--max-stream-data-bidi-local=" + strconv.Itoa(h3.StreamWindow)}, windowFlags...)
	if spec.ServerName != "" {
		args = append(args, "--sni="+spec.ServerName)
	}
	args = append(args, t.Host, strconv.Itoa(t.Port))
	for _, p := range paths {
		args = append(args, "https://"+net.JoinHostPort(t.Host, strconv.Itoa(t.Port))+p)
	}
	rctx, cancel := context.WithTimeoutCause(ctx, limit+killGrace, &endpoint.TimeoutError{Phase: endpoint.PhaseTotal, Limit: limit})
	defer cancel()
	cmd := exec.CommandContext(rctx, prog, args...)
	cmd.Env = os.Environ()
	if req.KeyLog != "" {
		cmd.Env = append(cmd.Env, "SSLKEYLOGFILE="+req.KeyLog) // GnuTLS writes it
	}
	if spec.QlogDir != "" {
		defer func() {
			_ = copyFile(qlog, filepath.Join(spec.QlogDir, "ngtcp2-client-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".sqlog"))
		}()
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 3 * time.Second
	started := time.Now()
	runErr := cmd.Run()
	var cpu endpoint.CPUTime
	if cmd.ProcessState != nil {
		cpu = endpoint.CPUTime{User: cmd.ProcessState.UserTime(), Sys: cmd.ProcessState.SystemTime()}
	}
	if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
		return fail(cause)
	}
	tr, err := readQlog(qlog)
	if err != nil {
		if runErr != nil {
			return fail(fmt.Errorf("%v: %s", runErr, tail(stderr.String())))
		}
		return fail(fmt.Errorf("its qlog: %w", err))
	}
	fr, err := record(tr, paths, dl, cc, started)
	if fr != nil {
		fr.CPU.ClientUser, fr.CPU.ClientSys = cpu.User, cpu.Sys
	}
	if err == nil && runErr != nil {
		err = fmt.Errorf("%v: %s", runErr, tail(stderr.String()))
	}
	if err != nil {
		return fr, nil, fmt.Errorf("ngtcp2 client: %w", err)
	}
	return fr, nil, nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 500 {
		s = "..." + s[len(s)-500:]
	}
	return s
}

// ms turns a qlog time (ms from the connection's first event) into the
// record's nanoseconds.
func ms(t float64) int64 { return int64(t * 1e6) }

// record turns the client's trace into the built-in client's record of
// the requests of paths, whose bodies gtlsclient wrote into dl, checking
// each body.
func record(tr *trace, paths []string, dl, cc string, started time.Time) (*endpoint.FetchResult, error) {
	if tr.vantage != "client" {
		return nil, fmt.Errorf("its qlog is the %s's, not the client's", tr.vantage)
	}
	start := tr.firstTime
	ct := endpoint.ConnTiming{
		Start: 0, Closed: ms(tr.lastTime - start), Requests: len(paths),
		Negotiated: model.Negotiated{ALPN: h3.ALPN, HTTPVersion: "HTTP/3.0", TLSVersion: "TLS 1.3", QUICVersion: "v1"},
		Transport:  tr.transport("client", cc),
	}
	if tr.handshake > 0 {
		ct.Connected, ct.Handshake = ms(tr.handshake-start), ms(tr.handshake-start)
	}
	fr := &endpoint.FetchResult{Proto: model.ProtoH3, Started: started, Conns: []endpoint.ConnTiming{ct}, Negotiated: ct.Negotiated}
	ids := tr.requestStreams()
	var errs []error
	for i, p := range paths {
		rt := endpoint.RequestTiming{Path: p, Conn: 0}
		if i >= len(ids) {
			rt.Error = "never requested"
			errs = append(errs, fmt.Errorf("%s: never requested", p))
			fr.Requests = append(fr.Requests, rt)
			continue
		}
		s := tr.streams[ids[i]]
		if s.firstSent >= 0 {
			rt.Start, rt.Sent = ms(s.firstSent-start), ms(s.firstSent-start)
		}
		if s.firstRecv >= 0 {
			rt.FirstByte = ms(s.firstRecv - start)
		}
		body, err := checkBody(dl, p)
		switch {
		case err != nil:
			rt.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		case s.fin < 0:
			rt.Error = "no FIN received"
			errs = append(errs, fmt.Errorf("%s: no FIN received", p))
		default:
			rt.Status = 200
			rt.End = ms(s.fin - start)
			rt.Bytes = body
			rt.Chunks = chunks(s, start, body)
			fr.Bytes += body
		}
		fr.Requests = append(fr.Requests, rt)
	}
	for _, r := range fr.Requests {
		if r.Start > 0 && (fr.MeasureStart == 0 || r.Start < fr.MeasureStart) {
			fr.MeasureStart = r.Start
		}
		fr.MeasureEnd = max(fr.MeasureEnd, r.End)
	}
	return fr, errors.Join(errs...)
}

// chunks spreads body bytes over the stream's received STREAM frames in
// proportion to their lengths (which also carry HTTP/3's framing, a few
// bytes per frame), so that they sum to the body.
func chunks(s *streamTrace, start float64, body int64) []endpoint.Chunk {
	if s.recvBytes <= 0 || body <= 0 {
		return nil
	}
	var out []endpoint.Chunk
	var done int64
	var acc float64
	for i, c := range s.chunks {
		acc += c[1]
		n := int64(acc/float64(s.recvBytes)*float64(body)) - done
		if i == len(s.chunks)-1 {
			n = body - done
		}
		if n <= 0 {
			continue
		}
		t := ms(c[0] - start)
		if k := len(out); k > 0 && out[k-1].T == t {
			out[k-1].Bytes += int(n)
		} else {
			out = append(out, endpoint.Chunk{T: t, Bytes: int(n)})
		}
		done += n
	}
	return out
}

// checkBody checks the body gtlsclient wrote for p into dl (named by the
// path's last element, query included) and returns its length: a /bytes/N
// body must be N bytes of quicbench's pattern.
func checkBody(dl, p string) (int64, error) {
	u, err := url.Parse(p)
	if err != nil {
		return 0, err
	}
	name := path.Base(u.Path)
	if u.RawQuery != "" {
		name += "?" + u.RawQuery
	}
	b, err := os.ReadFile(filepath.Join(dl, name))
	if err != nil {
		return 0, fmt.Errorf("no body downloaded: %w", err)
	}
	seg := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(seg) == 2 && seg[0] == "bytes" {
		n, err := content.ParseSize(seg[1])
		if err != nil {
			return 0, err
		}
		if int64(len(b)) != n {
			return int64(len(b)), fmt.Errorf("%d bytes, want %d (an error page?)", len(b), n)
		}
		var v content.Verifier
		if err := v.Check(b); err != nil {
			return int64(len(b)), fmt.Errorf("body: %w", err)
		}
	}
	return int64(len(b)), nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

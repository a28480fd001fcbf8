package endpoint

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// PeerConfig configures a peer server: another implementation than
// quicbench's own, run by StartPeer as a child process (docs/peers.md).
type PeerConfig struct {
	// Impl is peers.Aioquic or peers.Caddy.
	Impl string
	// Host is the IPv4 address to listen on; "" listens on all addresses.
	Host string
	// Port is the TLS port (TCP and UDP); 0 picks a free one.
	Port int
	// Names are extra names for the generated certificate (as
	// ServerConfig.Names).
	Names []string
	// Certificate, if set, is presented instead of a generated one.
	Certificate *tls.Certificate
	// Sites maps NAME to a directory served as /site/NAME/.
	Sites map[string]string
	// Paths (caddy only) are URL paths written to disk before Caddy
	// starts, byte-identical to what quicbench's server sends:
	// /bytes/N and /page/N/S (the page and all its objects). /echo ("ok\n"
	// to a GET) is always there.
	Paths []string
	// CongestionControl (caddy only) is the TCP congestion control Caddy's
	// sockets must use; Caddy cannot choose it per socket, so it must be
	// the namespace's default, which StartPeer sets (and restores) when it
	// runs in a namespace of its own. "" keeps the default. aioquic's
	// QUIC always uses AioquicCC, as quicbench's QUIC always uses
	// quic-go's Cubic.
	CongestionControl string
	// QlogDir (aioquic only) receives one qlog file per connection.
	QlogDir string
	// KeyLogFile (aioquic only) receives TLS secrets (SSLKEYLOGFILE).
	KeyLogFile string
	// Logf receives what the peer reports on its standard error.
	Logf func(format string, args ...any) `json:"-"`
}

// What the aioquic peer is configured with (docs/peers.md): Cubic, as
// quic-go; full-size datagrams on the testbed's 1500-byte MTU (quic-go
// reaches 1452 by path MTU discovery; aioquic has none); quic-go's flow
// control windows; quic-go's wished-for UDP buffer size.
const (
	AioquicCC              = "cubic"
	AioquicMaxDatagramSize = 1452
	aioquicSocketBuffer    = 7 << 20
)

// PeerServer is a running peer server. It serves the control channel like
// *Server (ServeControl).
type PeerServer struct {
	cfg  PeerConfig
	info ServerInfo
	dir  string // scratch directory, removed by Close
	logf func(string, ...any)

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	stderr tailBuffer

	book *statsBook
	mu   sync.Mutex
	refs map[string]bookRef // aioquic: open connections by client address

	restoreCC func()
	closeOnce sync.Once
}

// StartPeer starts the peer cfg.Impl as a child process (in its own
// process group, killed if this process dies) and returns once it listens.
// Close stops it and everything it started.
func StartPeer(ctx context.Context, cfg PeerConfig) (*PeerServer, error) {
	if cfg.Impl != peers.Aioquic && cfg.Impl != peers.Caddy {
		return nil, fmt.Errorf("endpoint: StartPeer runs %s or %s, not %q", peers.Aioquic, peers.Caddy, cfg.Impl)
	}
	if cfg.Host != "" {
		a, err := netip.ParseAddr(cfg.Host)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("endpoint: %s: listen address %q is not an IPv4 address", cfg.Impl, cfg.Host)
		}
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("endpoint: port %d: want 0..65535", cfg.Port)
	}
	for name := range cfg.Sites {
		if err := validSiteName(name); err != nil {
			return nil, fmt.Errorf("endpoint: site %q: %w", name, err)
		}
	}
	p := &PeerServer{cfg: cfg, logf: cfg.Logf, book: newStatsBook(4096), refs: map[string]bookRef{}, exited: make(chan struct{})}
	if p.logf == nil {
		p.logf = func(string, ...any) {}
	}
	var err error
	if p.dir, err = os.MkdirTemp("", "qb-"+cfg.Impl+"-"); err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = p.Close()
		}
	}()
	cert, err := serverCert(&p.info, cfg.Certificate, cfg.Host, cfg.Names)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := writeCertFiles(p.dir, cert)
	if err != nil {
		return nil, err
	}
	p.info.Host = cfg.Host
	p.info.Impl = cfg.Impl
	p.info.Protocols = peers.Protocols(cfg.Impl)
	switch cfg.Impl {
	case peers.Aioquic:
		err = p.startAioquic(ctx, certFile, keyFile)
	case peers.Caddy:
		err = p.startCaddy(ctx, certFile, keyFile)
	}
	if err != nil {
		return nil, err
	}
	p.info.PID = os.Getpid()
	ok = true
	return p, nil
}

// writeCertFiles writes cert's chain and key as PEM files into dir.
func writeCertFiles(dir string, cert tls.Certificate) (certFile, keyFile string, err error) {
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return "", "", fmt.Errorf("endpoint: certificate key: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Info returns the server's addresses, protocols, certificate identity,
// implementation and version.
func (p *PeerServer) Info() ServerInfo { return p.info }

// Exited is closed when the peer process has exited.
func (p *PeerServer) Exited() <-chan struct{} { return p.exited }

// Describe says how the peer process ended ("running" while it runs), with
// the end of its standard error.
func (p *PeerServer) Describe() string {
	select {
	case <-p.exited:
	default:
		return "running"
	}
	s := p.cfg.Impl + " exited"
	if p.cmd != nil && p.cmd.ProcessState != nil {
		s = p.cfg.Impl + " " + p.cmd.ProcessState.String()
	}
	if t := p.stderr.String(); t != "" {
		s += ": " + t
	}
	return s
}

// CPU returns the CPU time of this process (the wrapper) plus that of the
// peer process and all its descendants, living or reaped.
func (p *PeerServer) CPU() (CPUTime, error) {
	self, err := ProcessCPU()
	if err != nil {
		return CPUTime{}, err
	}
	if p.cmd == nil || p.cmd.Process == nil {
		return self, nil
	}
	tree, err := treeCPU(p.cmd.Process.Pid)
	if err != nil {
		return CPUTime{}, err
	}
	return CPUTime{User: self.User + tree.User, Sys: self.Sys + tree.Sys}, nil
}

// ConnStats returns the server-side statistics of the connection from addr
// once it has ended: aioquic reports QUIC connections from its recovery
// state; Caddy reports none.
func (p *PeerServer) ConnStats(ctx context.Context, kind, addr string) (model.TransportStats, error) {
	switch {
	case p.cfg.Impl == peers.Caddy:
		return model.TransportStats{}, errors.New("caddy reports no transport statistics")
	case kind != "quic":
		return model.TransportStats{}, fmt.Errorf("aioquic serves QUIC only, no %s connection", kind)
	}
	return p.book.wait(ctx, kind, addr)
}

// Close stops the peer (end of its input, SIGTERM to its process group,
// SIGKILL after 3 s), removes its scratch directory and restores the
// namespace's congestion control. It is safe to call more than once.
func (p *PeerServer) Close() error {
	p.closeOnce.Do(func() {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.stdin.Close()
			pgid := p.cmd.Process.Pid
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(3 * time.Second):
			}
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // the child and anything it left
			<-p.exited
		}
		if p.restoreCC != nil {
			p.restoreCC()
		}
		if p.dir != "" {
			_ = os.RemoveAll(p.dir)
		}
	})
	return nil
}

// start starts cmd in a process group of its own that gets SIGKILL when
// this process dies. PR_SET_PDEATHSIG fires when the starting thread
// exits, so the starting goroutine keeps its thread until the child ends.
func (p *PeerServer) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("endpoint: start %s: %w", p.cfg.Impl, err)
	}
	p.cmd = cmd
	return nil
}

// aioquicConfig is what server.py reads (its load_config).
type aioquicConfig struct {
	Host            string            `json:"host"`
	Port            int               `json:"port"`
	Cert            string            `json:"cert"`
	Key             string            `json:"key"`
	CC              string            `json:"cc"`
	MaxDatagramSize int               `json:"max_datagram_size"`
	MaxData         int               `json:"max_data"`
	MaxStreamData   int               `json:"max_stream_data"`
	SocketBuffer    int               `json:"socket_buffer"`
	QlogDir         string            `json:"qlog_dir"`
	KeyLog          string            `json:"keylog"`
	Sites           map[string]string `json:"sites"`
	PNGHead         string            `json:"png_head"`
	PNGTail         string            `json:"png_tail"`
}

// aioquicLine is one line server.py prints.
type aioquicLine struct {
	Ready *struct {
		Version         string `json:"version"`
		Port            int    `json:"port"`
		CC              string `json:"cc"`
		MaxDatagramSize int    `json:"max_datagram_size"`
		RcvBuf          int    `json:"rcvbuf"`
	} `json:"ready"`
	Open  string        `json:"open"`
	End   string        `json:"end"`
	Stats *aioquicStats `json:"stats"`
}

// aioquicStats is server.py's read_stats.
type aioquicStats struct {
	CC            string  `json:"cc"`
	SRTTms        float64 `json:"srtt_ms"`
	RTTVarms      float64 `json:"rttvar_ms"`
	MinRTTms      float64 `json:"min_rtt_ms"`
	Cwnd          int64   `json:"cwnd"`
	Ssthresh      int64   `json:"ssthresh"`
	BytesInFlight int64   `json:"bytes_in_flight"`
	PacketsSent   int64   `json:"packets_sent"`
	PacketsLost   int64   `json:"packets_lost"`
	BytesLost     int64   `json:"bytes_lost"`
	PTOCount      int64   `json:"pto_count"`
}

// transport maps aioquic's statistics onto model.TransportStats (the QUIC
// meanings of docs/metrics.md); what aioquic does not count is NotMeasured.
func (s aioquicStats) transport() model.TransportStats {
	return model.TransportStats{
		Kind: "quic", Side: "server", CongestionAlgo: s.CC,
		SmoothedRTTms: s.SRTTms, RTTVarms: s.RTTVarms, MinRTTms: s.MinRTTms,
		CwndBytes: s.Cwnd, SsthreshBytes: s.Ssthresh,
		PacketsSent: s.PacketsSent, PacketsLost: s.PacketsLost,
		Retransmits: s.PacketsLost, BytesRetransmitted: s.BytesLost,
		PTOCount:               s.PTOCount,
		CongestionEvents:       model.NotMeasured,
		CongestionStateChanges: model.NotMeasured,
	}
}

func (p *PeerServer) startAioquic(ctx context.Context, certFile, keyFile string) error {
	python, err := peers.FindAioquic()
	if err != nil {
		return err
	}
	host := p.cfg.Host
	if host == "" {
		host = "0.0.0.0"
	}
	head, tail := content.PNGFrame()
	conf := aioquicConfig{
		Host: host, Port: p.cfg.Port, Cert: certFile, Key: keyFile,
		CC: AioquicCC, MaxDatagramSize: AioquicMaxDatagramSize,
		MaxData: h3.ConnWindow, MaxStreamData: h3.StreamWindow, SocketBuffer: aioquicSocketBuffer,
		KeyLog: p.cfg.KeyLogFile, Sites: p.cfg.Sites,
		PNGHead: hex.EncodeToString(head), PNGTail: hex.EncodeToString(tail),
	}
	if p.cfg.QlogDir != "" {
		if err := os.MkdirAll(p.cfg.QlogDir, 0o755); err != nil {
			return fmt.Errorf("endpoint: qlog directory: %w", err)
		}
		conf.QlogDir = p.cfg.QlogDir
	}
	for name, dir := range p.cfg.Sites {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("endpoint: site %s: %s is not a directory", name, dir)
		}
	}
	script := filepath.Join(p.dir, "server.py")
	confFile := filepath.Join(p.dir, "config.json")
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(script, peers.AioquicServer, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(confFile, b, 0o600); err != nil {
		return err
	}
	cmd := exec.Command(python, script, "--config", confFile)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	cmd.Stderr = &lineWriter{tail: &p.stderr, logf: func(l string) { p.logf("aioquic: %s", l) }}
	if err := p.start(cmd); err != nil {
		return err
	}
	ready := make(chan error, 1)
	go p.readAioquic(stdout, ready)
	select {
	case err = <-ready:
	case <-p.exited:
		err = errors.New("exited before it listened")
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(30 * time.Second):
		err = errors.New("not listening after 30 s")
	}
	if err != nil {
		return fmt.Errorf("endpoint: aioquic server: %w (%s)", err, p.stderr.String())
	}
	return nil
}

// readAioquic reads server.py's output: its ready line (sent to ready),
// then the start and end of each connection.
func (p *PeerServer) readAioquic(r io.Reader, ready chan<- error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	gotReady := false
	for sc.Scan() {
		var l aioquicLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			p.logf("aioquic: unexpected output %q", sc.Text())
			continue
		}
		switch {
		case l.Ready != nil && !gotReady:
			gotReady = true
			r := l.Ready
			if r.Version != peers.AioquicVersion {
				ready <- fmt.Errorf("aioquic %s found, but quicbench reads the statistics of aioquic %s (private attributes): "+
					"reinstall the pinned version with scripts/setup.sh", r.Version, peers.AioquicVersion)
				continue
			}
			p.info.Port = r.Port
			p.info.Version = "aioquic " + r.Version
			p.info.Settings = map[string]string{
				"cc":                r.CC,
				"max_datagram_size": strconv.Itoa(r.MaxDatagramSize),
				"max_data":          strconv.Itoa(h3.ConnWindow),
				"max_stream_data":   strconv.Itoa(h3.StreamWindow),
				"udp_rcvbuf":        strconv.Itoa(r.RcvBuf),
			}
			ready <- nil
		case l.Open != "":
			ref := p.book.open("quic", l.Open)
			p.mu.Lock()
			p.refs[l.Open] = ref
			p.mu.Unlock()
		case l.End != "" && l.Stats != nil:
			p.mu.Lock()
			ref, ok := p.refs[l.End]
			delete(p.refs, l.End)
			p.mu.Unlock()
			if ok {
				p.book.put(ref, l.Stats.transport())
			}
		}
	}
}

// Caddy's site: everything under www/, /page/N/S answered by
// www/page/N/S/index.html (the page's objects sit beside it), sites from
// their own directories, every response uncacheable.
const caddyfileTemplate = `{
	admin off
	auto_https disable_redirects
	servers {
		protocols h1 h2 h3
	}
}
https://:{{PORT}} {
{{BIND}}	tls {{CERT}} {{KEY}}
	header Cache-Control no-store
	@pagedoc path_regexp ^/page/[^/]+/[^/]+$
	rewrite @pagedoc {path}/index.html
{{SITES}}	handle {
		root * {{WWW}}
		file_server
	}
}
`

func (p *PeerServer) startCaddy(ctx context.Context, certFile, keyFile string) error {
	if p.cfg.QlogDir != "" || p.cfg.KeyLogFile != "" {
		return errors.New("endpoint: caddy writes neither qlog files nor TLS key logs: run it without --qlog and --keylog")
	}
	caddy, version, err := peers.FindCaddy(ctx)
	if err != nil {
		return err
	}
	p.info.Version = "caddy " + version
	www := filepath.Join(p.dir, "www")
	if err := Materialize(www, p.cfg.Paths); err != nil {
		return err
	}
	port := p.cfg.Port
	if port == 0 {
		if port, err = freePort(p.cfg.Host); err != nil {
			return err
		}
	}
	p.info.Port = port
	tcpCC, err := p.caddyCC()
	if err != nil {
		return err
	}
	p.info.Settings = map[string]string{"tcp_cc": tcpCC, "quic_cc": "cubic (quic-go's)"}
	bind := ""
	if p.cfg.Host != "" {
		bind = "\tbind " + p.cfg.Host + "\n"
	}
	var sites strings.Builder
	names := make([]string, 0, len(p.cfg.Sites))
	for n := range p.cfg.Sites {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dir, err := filepath.Abs(p.cfg.Sites[n])
		if err != nil {
			return err
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("endpoint: site %s: %s is not a directory", n, dir)
		}
		fmt.Fprintf(&sites, "\thandle_path /site/%s/* {\n\t\troot * %s\n\t\tfile_server\n\t}\n", n, caddyQuote(dir))
	}
	conf := strings.NewReplacer("{{PORT}}", strconv.Itoa(port), "{{BIND}}", bind,
		"{{CERT}}", caddyQuote(certFile), "{{KEY}}", caddyQuote(keyFile),
		"{{SITES}}", sites.String(), "{{WWW}}", caddyQuote(www)).Replace(caddyfileTemplate)
	confFile := filepath.Join(p.dir, "Caddyfile")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	home := filepath.Join(p.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(caddy, "run", "--config", confFile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	up := make(chan struct{})
	var upOnce sync.Once
	lw := &lineWriter{tail: &p.stderr, logf: func(l string) {
		if strings.Contains(l, `"serving initial configuration"`) {
			upOnce.Do(func() { close(up) })
		}
		if strings.Contains(l, `"level":"error"`) || !strings.HasPrefix(l, "{") {
			p.logf("caddy: %s", l)
		}
	}}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := p.start(cmd); err != nil {
		return err
	}
	select {
	case <-up:
	case <-p.exited:
		return fmt.Errorf("endpoint: caddy exited before it listened: %s", p.stderr.String())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return fmt.Errorf("endpoint: caddy not listening after 30 s: %s", p.stderr.String())
	}
	dialHost := p.cfg.Host
	if dialHost == "" {
		dialHost = "127.0.0.1"
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(dialHost, strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return fmt.Errorf("endpoint: caddy reported its start but does not accept on port %d: %w", port, err)
	}
	_ = c.Close()
	return nil
}

// caddyQuote quotes a Caddyfile token.
func caddyQuote(s string) string { return strconv.Quote(s) }

// freePort returns a port free on both TCP and UDP of host.
func freePort(host string) (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("endpoint: finding a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		_ = ln.Close()
		if err == nil {
			_ = u.Close()
			return port, nil
		}
	}
	return 0, errors.New("endpoint: no port free on both TCP and UDP")
}

const sysCCPath = "/proc/sys/net/ipv4/tcp_congestion_control"

// caddyCC makes the network namespace's default TCP congestion control
// p.cfg.CongestionControl (Caddy's sockets take the default), restoring it
// on Close, and returns the one in force. It never changes the host's:
// outside a namespace of its own it only accepts the default.
func (p *PeerServer) caddyCC() (string, error) {
	cur, err := os.ReadFile(sysCCPath)
	if err != nil {
		return "", fmt.Errorf("endpoint: %w", err)
	}
	have := strings.TrimSpace(string(cur))
	want := p.cfg.CongestionControl
	if want == "" || want == have {
		return have, nil
	}
	self, err1 := os.Readlink("/proc/self/ns/net")
	init, err2 := os.Readlink("/proc/1/ns/net")
	if err1 != nil || err2 != nil || self == init {
		return "", fmt.Errorf("endpoint: caddy cannot choose its sockets' congestion control, and the default here is %s, not %s; "+
			"quicbench changes the default only inside a network namespace of its own (a testbed): run with --cc %s or without --cc", have, want, have)
	}
	if err := os.WriteFile(sysCCPath, []byte(want), 0o644); err != nil {
		allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
		return "", fmt.Errorf("endpoint: caddy cannot choose its sockets' congestion control, and making %s the namespace's default failed: %w "+
			"(namespaces may default only to %q: allow it host-wide with sysctl -w net.ipv4.tcp_allowed_congestion_control=\"%s %s\")",
			want, err, strings.TrimSpace(string(allowed)), strings.TrimSpace(string(allowed)), want)
	}
	p.restoreCC = func() { _ = os.WriteFile(sysCCPath, []byte(have), 0o644) }
	return want, nil
}

// Materialize writes into dir the files a static web server needs to answer
// the URL paths exactly as quicbench's server does: /bytes/N (N pattern
// bytes, content.ParseSize) and /page/N/S (the page as
// page/N/S/index.html, and its objects page/N/S/I.png), plus /echo ("ok\n",
// what a GET of /echo answers). The files are named by the path as given,
// so give each path as clients request it (e.g. /bytes/10000000).
func Materialize(dir string, paths []string) error {
	write := func(rel string, fill func(io.Writer) error) error {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		f, err := os.Create(full)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		err = fill(bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := write("echo", func(w io.Writer) error { _, err := io.WriteString(w, "ok\n"); return err }); err != nil {
		return fmt.Errorf("endpoint: materialize /echo: %w", err)
	}
	for _, path := range paths {
		seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
		bad := !strings.HasPrefix(path, "/") || slices.ContainsFunc(seg, func(s string) bool { return s == "" || s == "." || s == ".." })
		switch {
		case bad:
			return fmt.Errorf("endpoint: path %q: want /bytes/N or /page/N/S", path)
		case len(seg) == 2 && seg[0] == "bytes":
			n, err := content.ParseSize(seg[1])
			if err != nil {
				return fmt.Errorf("endpoint: path %q: %w", path, err)
			}
			if err := write(path, func(w io.Writer) error { _, err := content.WriteBody(w, n); return err }); err != nil {
				return fmt.Errorf("endpoint: materialize %s: %w", path, err)
			}
		case len(seg) == 3 && seg[0] == "page":
			pg, err := content.ParsePage(seg[1], seg[2])
			if err != nil {
				return fmt.Errorf("endpoint: path %q: %w", path, err)
			}
			if err := write(path+"/index.html", func(w io.Writer) error { _, err := w.Write(pg.HTML(path)); return err }); err != nil {
				return fmt.Errorf("endpoint: materialize %s: %w", path, err)
			}
			for i := range pg.Objects {
				size := pg.ObjectSize(i)
				if err := write(content.ObjectPath(path, i), func(w io.Writer) error { return content.WriteObject(w, size) }); err != nil {
					return fmt.Errorf("endpoint: materialize %s: %w", path, err)
				}
			}
		default:
			return fmt.Errorf("endpoint: path %q: only /bytes/N and /page/N/S can be served from files (sites come from --site)", path)
		}
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// lineWriter splits what a child writes into lines for logf, keeping a
// tail.
type lineWriter struct {
	tail    *tailBuffer
	logf    func(string)
	mu      sync.Mutex
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	_, _ = w.tail.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := strings.IndexByte(string(w.partial), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if line != "" {
			w.logf(line)
		}
	}
	if len(w.partial) > 64<<10 {
		w.logf(string(w.partial))
		w.partial = nil
	}
	return len(b), nil
}

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture quicbench runs on).
const userHZ = 100

// treeCPU sums utime, stime, cutime and cstime of /proc/PID/stat over pid
// and its living descendants (cutime and cstime hold the reaped ones).
func treeCPU(pid int) (CPUTime, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return CPUTime{}, err
	}
	type proc struct {
		ppid        int
		user, sys   int64
		cuser, csys int64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// The command name, in parentheses, may hold spaces: fields start
		// after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		num := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
		// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
		procs[id] = proc{ppid: int(num(1)), user: num(11), sys: num(12), cuser: num(13), csys: num(14)}
	}
	if _, ok := procs[pid]; !ok {
		return CPUTime{}, fmt.Errorf("peer process %d is gone", pid)
	}
	children := map[int][]int{}
	for id, p := range procs {
		children[p.ppid] = append(children[p.ppid], id)
	}
	var user, sys int64
	queue := []int{pid}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		p := procs[id]
		user += p.user + p.cuser
		sys += p.sys + p.csys
		queue = append(queue, children[id]...)
	}
	tick := time.Second / userHZ
	return CPUTime{User: time.Duration(user) * tick, Sys: time.Duration(sys) * tick}, nil
}

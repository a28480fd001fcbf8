package endpoint

import (
	"bufio"
	"cmp"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/internal/safefs"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// PeerConfig configures a peer server: another implementation than
// quicbench's own, run by StartPeer as a child process (docs/peers.md).
type PeerConfig struct {
	// Impl is the server's name in the registry of stacks (package peers).
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
	// Paths (servers that serve files, peers.LaunchFiles) are URL paths
	// written to disk before the server starts, byte-identical to what
	// quicbench's server sends: /bytes/N and /page/N/S (the page and all
	// its objects). /echo ("ok\n" to a GET) is always there.
	Paths []string
	// CongestionControl is the plan's congestion control (a
	// model.CongestionControls name, "" for none): TCP connections take
	// it from the testbed's routes (or, for a server that cannot set its
	// sockets' own, from the namespace's default: NamespaceCC); over QUIC
	// the server runs it when it can choose (its stack's CC.QUIC), else
	// its own (QUICCC says which).
	CongestionControl string
	// QlogDir receives one qlog file per connection, for the stacks that
	// write them (peers.Stack.Qlog).
	QlogDir string
	// KeyLogFile receives TLS secrets (NSS key log format), for the
	// stacks that write them (peers.Stack.KeyLog).
	KeyLogFile string
	// Logf receives what the peer reports on its standard error.
	Logf func(format string, args ...any) `json:"-"`
}

// PeerLauncher starts the server of one stack: it prepares what the server
// needs in the PeerServer's scratch directory (Dir), starts it (Start, or
// RunProgram for a program speaking the peer program protocol) and
// returns once it listens, having set the hello's Port, Version and
// Settings (SetInfo). Each stack's package registers its launcher
// (RegisterPeer).
type PeerLauncher func(ctx context.Context, p *PeerServer) error

var (
	launchersMu sync.Mutex
	launchers   = map[string]PeerLauncher{}
)

// RegisterCommandLauncher registers the launcher of every contract stack's
// server (peers.LaunchCommand): package peers/contract calls it at init.
func RegisterCommandLauncher(l PeerLauncher) {
	launchersMu.Lock()
	defer launchersMu.Unlock()
	commandLauncher = l
}

var commandLauncher PeerLauncher

// RegisterPeer registers the launcher of the server of stack name; the
// stack's package calls it at init.
func RegisterPeer(name string, l PeerLauncher) {
	launchersMu.Lock()
	defer launchersMu.Unlock()
	if _, dup := launchers[name]; dup {
		panic("endpoint: peer launcher for " + name + " registered twice")
	}
	launchers[name] = l
}

// PeerServer is a running peer server. It serves the control channel like
// *Server (ServeControl).
type PeerServer struct {
	cfg    PeerConfig
	stack  *peers.Stack
	info   ServerInfo
	dir    string // scratch directory, removed by Close
	logf   func(string, ...any)
	quicCC string // what it runs over QUIC ("" without QUIC)

	certFile, keyFile string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	stderr tailBuffer

	// stats: the program reports its connections (RunProgram), or
	// statsSource reads them (SetStatsSource)
	stats       bool
	statsSource func(ctx context.Context, kind, addr string) (model.TransportStats, error)
	book        *statsBook
	mu          sync.Mutex
	refs        map[string]bookRef              // open connections by client address
	asks        map[string][]chan *programStats // live statistics asked of the program, by address
	stdinMu     sync.Mutex                      // one line at a time to the program

	closers   []func()
	closeOnce sync.Once
}

// StartPeer starts the server of stack cfg.Impl as a child process (in its
// own process group, killed if this process dies) and returns once it
// listens. Close stops it and everything it started.
func StartPeer(ctx context.Context, cfg PeerConfig) (*PeerServer, error) {
	st, ok := peers.ServerStack(cfg.Impl)
	if !ok || st.Server.Launch == peers.LaunchOwn {
		return nil, fmt.Errorf("endpoint: StartPeer runs a peer server (%s), not %q", strings.Join(peerNames(), ", "), cfg.Impl)
	}
	launchersMu.Lock()
	launch := launchers[cfg.Impl]
	if st.Server.Launch == peers.LaunchCommand {
		launch = commandLauncher
	}
	launchersMu.Unlock()
	if launch == nil {
		return nil, fmt.Errorf("endpoint: the %s server's code is not linked into this program", cfg.Impl)
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
	if cfg.CongestionControl != "" && !slices.Contains(model.CongestionControls, cfg.CongestionControl) {
		return nil, fmt.Errorf("endpoint: congestion control %q: want one of %s", cfg.CongestionControl, strings.Join(model.CongestionControls, ", "))
	}
	if cfg.QlogDir != "" && !st.Qlog {
		return nil, fmt.Errorf("endpoint: %s writes no qlog files: run it without --qlog", cfg.Impl)
	}
	if cfg.KeyLogFile != "" && !st.KeyLog {
		return nil, fmt.Errorf("endpoint: %s writes no TLS key log: run it without --keylog", cfg.Impl)
	}
	if len(cfg.Paths) > 0 && st.Server.Launch != peers.LaunchFiles && st.Server.Launch != peers.LaunchCommand {
		return nil, fmt.Errorf("endpoint: %s generates every path itself: give it no paths to write", cfg.Impl)
	}
	for name, dir := range cfg.Sites {
		if err := validSiteName(name); err != nil {
			return nil, fmt.Errorf("endpoint: site %q: %w", name, err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("endpoint: site %s: %s is not a directory", name, dir)
		}
	}
	p := &PeerServer{cfg: cfg, stack: st, logf: cfg.Logf, book: newStatsBook(4096), refs: map[string]bookRef{}, asks: map[string][]chan *programStats{}, exited: make(chan struct{})}
	if p.logf == nil {
		p.logf = func(string, ...any) {}
	}
	if slices.ContainsFunc(st.Server.Protocols, model.IsQUIC) {
		p.quicCC, _ = st.Server.CC.QUICFor(cmp.Or(cfg.CongestionControl, model.DefaultCC))
	}
	var err error
	if p.dir, err = os.MkdirTemp("", "qb-"+cfg.Impl+"-"); err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	ok = false
	defer func() {
		if !ok {
			_ = p.Close()
		}
	}()
	cert, err := serverCert(&p.info, cfg.Certificate, cfg.Host, cfg.Names)
	if err != nil {
		return nil, err
	}
	if p.certFile, p.keyFile, err = writeCertFiles(p.dir, cert); err != nil {
		return nil, err
	}
	p.info.Host = cfg.Host
	p.info.Impl = cfg.Impl
	p.info.Protocols = slices.Clone(st.Server.Protocols)
	if err := launch(ctx, p); err != nil {
		if d := p.stderr.String(); d != "" && !strings.Contains(err.Error(), d) {
			err = fmt.Errorf("%w (%s)", err, d)
		}
		return nil, fmt.Errorf("endpoint: %s server: %w", cfg.Impl, err)
	}
	if p.info.Port == 0 {
		return nil, fmt.Errorf("endpoint: %s server: its launcher set no port", cfg.Impl)
	}
	p.info.PID = os.Getpid()
	ok = true
	return p, nil
}

// peerNames lists the peer servers of the registry.
func peerNames() []string {
	var out []string
	for _, n := range peers.Servers() {
		if st, _ := peers.ServerStack(n); st.Server.Launch != peers.LaunchOwn {
			out = append(out, n)
		}
	}
	return out
}

// Config returns the server's configuration.
func (p *PeerServer) Config() PeerConfig { return p.cfg }

// Stack returns the server's description.
func (p *PeerServer) Stack() *peers.Stack { return p.stack }

// Dir is the server's scratch directory, removed by Close.
func (p *PeerServer) Dir() string { return p.dir }

// CertFiles are the PEM files of the certificate chain and key the server
// presents.
func (p *PeerServer) CertFiles() (cert, key string) { return p.certFile, p.keyFile }

// QUICCC is the congestion control the server runs over QUIC: the plan's
// when its stack can run it, else the stack's own ("" without QUIC).
func (p *PeerServer) QUICCC() string { return p.quicCC }

// Logf logs what the peer reports.
func (p *PeerServer) Logf(format string, args ...any) { p.logf(format, args...) }

// SetInfo sets the hello's port, version ("caddy 2.6.2") and settings
// (what the server was configured with that the statistics do not show).
func (p *PeerServer) SetInfo(port int, version string, settings map[string]string) {
	p.info.Port, p.info.Version, p.info.Settings = port, version, settings
}

// SetStatsSource makes f answer ConnStats: a launcher that reads the
// server's statistics itself (from its qlog files, say).
func (p *PeerServer) SetStatsSource(f func(ctx context.Context, kind, addr string) (model.TransportStats, error)) {
	p.statsSource = f
}

// OnClose registers f to run when the server is closed, after its process
// ended (restoring what the launcher changed).
func (p *PeerServer) OnClose(f func()) { p.closers = append(p.closers, f) }

// FreePort returns the configured port, or a port free on both TCP and UDP
// of the configured host when none was configured.
func (p *PeerServer) FreePort() (int, error) {
	if p.cfg.Port != 0 {
		return p.cfg.Port, nil
	}
	return freePort(p.cfg.Host)
}

// Stderr returns a writer for the server's standard error (and output):
// its lines go to Logf when keep accepts them (nil keeps all), and its
// last 4 KiB into Describe and start errors.
func (p *PeerServer) Stderr(keep func(line string) bool) io.Writer {
	return &lineWriter{tail: &p.stderr, logf: func(l string) {
		if keep == nil || keep(l) {
			p.logf("%s: %s", p.cfg.Impl, l)
		}
	}}
}

// WaitTCP waits until the server accepts TCP connections on port, its
// process exits, ctx ends or timeout passes.
func (p *PeerServer) WaitTCP(ctx context.Context, port int, timeout time.Duration) error {
	host := cmp.Or(p.cfg.Host, "127.0.0.1")
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return errors.New("exited before it listened")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting on %s after %v: %v", addr, timeout, err)
		}
	}
}

// ProgramConfig is what a program speaking the peer program protocol reads
// from the file of its --config argument (docs/peers.md, "The peer program
// protocol"; peers/aioquic/server.py's load_config).
type ProgramConfig struct {
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

// What program peers are configured with (docs/peers.md): full-size
// datagrams on the testbed's 1500-byte MTU (quic-go's largest), quic-go's
// flow control windows and wished-for UDP buffer size.
const (
	PeerMaxDatagramSize = 1452
	peerSocketBuffer    = 7 << 20
)

// ProgramConfig returns the configuration of a program peer: the server's
// address, certificate, QUIC congestion control, quic-go's windows, qlog
// directory, key log and sites, and the PNG framing of endpoint/content.
func (p *PeerServer) ProgramConfig() (ProgramConfig, error) {
	head, tail := content.PNGFrame()
	conf := ProgramConfig{
		Host: cmp.Or(p.cfg.Host, "0.0.0.0"), Port: p.cfg.Port, Cert: p.certFile, Key: p.keyFile,
		CC: p.quicCC, MaxDatagramSize: PeerMaxDatagramSize,
		MaxData: h3.ConnWindow, MaxStreamData: h3.StreamWindow, SocketBuffer: peerSocketBuffer,
		KeyLog: p.cfg.KeyLogFile, Sites: map[string]string{},
		PNGHead: hex.EncodeToString(head), PNGTail: hex.EncodeToString(tail),
	}
	for name, dir := range p.cfg.Sites {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return conf, err
		}
		conf.Sites[name] = abs
	}
	if p.cfg.QlogDir != "" {
		if err := os.MkdirAll(p.cfg.QlogDir, 0o755); err != nil {
			return conf, fmt.Errorf("qlog directory: %w", err)
		}
		conf.QlogDir = p.cfg.QlogDir
	}
	return conf, nil
}

// ProgramReady is the ready line of a program peer.
type ProgramReady struct {
	Version         string `json:"version"`
	Port            int    `json:"port"`
	CC              string `json:"cc"`
	MaxDatagramSize int    `json:"max_datagram_size"`
	RcvBuf          int    `json:"rcvbuf"`
}

// programLine is one line a program peer prints.
type programLine struct {
	Ready *ProgramReady `json:"ready"`
	Open  string        `json:"open"`
	End   string        `json:"end"`
	Live  string        `json:"live"` // the answer to a stats line on its input
	Stats *programStats `json:"stats"`
}

// programStats are a connection's statistics as a program peer reports
// them when the connection ends (server.py's read_stats).
type programStats struct {
	CC               string  `json:"cc"`
	SRTTms           float64 `json:"srtt_ms"`
	RTTVarms         float64 `json:"rttvar_ms"`
	MinRTTms         float64 `json:"min_rtt_ms"`
	Cwnd             int64   `json:"cwnd"`
	Ssthresh         int64   `json:"ssthresh"`
	BytesInFlight    int64   `json:"bytes_in_flight"`
	PacketsSent      int64   `json:"packets_sent"`
	PacketsLost      int64   `json:"packets_lost"`
	BytesLost        int64   `json:"bytes_lost"`
	PTOCount         int64   `json:"pto_count"`
	CongestionEvents *int64  `json:"congestion_events"`
}

// transport maps a program's statistics onto model.TransportStats (the QUIC
// meanings of docs/metrics.md); what it does not count is NotMeasured.
//
// A program says "not measured" with -1: counts keep it (NotMeasured),
// times become 0.
func (s programStats) transport() model.TransportStats {
	ce := int64(model.NotMeasured)
	if s.CongestionEvents != nil {
		ce = max(*s.CongestionEvents, model.NotMeasured)
	}
	pos := func(v float64) float64 { return max(v, 0) }
	count := func(v int64) int64 { return max(v, model.NotMeasured) }
	s.SRTTms, s.RTTVarms, s.MinRTTms = pos(s.SRTTms), pos(s.RTTVarms), pos(s.MinRTTms)
	s.Cwnd, s.Ssthresh, s.PacketsSent, s.PacketsLost, s.BytesLost, s.PTOCount =
		count(s.Cwnd), count(s.Ssthresh), count(s.PacketsSent), count(s.PacketsLost), count(s.BytesLost), count(s.PTOCount)
	return model.TransportStats{
		Kind: "quic", Side: "server", CongestionAlgo: model.CCName(s.CC),
		SmoothedRTTms: s.SRTTms, RTTVarms: s.RTTVarms, MinRTTms: s.MinRTTms,
		CwndBytes: s.Cwnd, SsthreshBytes: s.Ssthresh,
		PacketsSent: s.PacketsSent, PacketsLost: s.PacketsLost,
		Retransmits: s.PacketsLost, BytesRetransmitted: s.BytesLost,
		PTOCount:               s.PTOCount,
		CongestionEvents:       ce,
		CongestionStateChanges: model.NotMeasured,
	}
}

// RunProgram runs a program speaking the peer program protocol: it writes
// conf to config.json in the scratch directory, starts argv with
// "--config FILE" appended (env added to this process's environment),
// reads its output and returns once its ready line came. The connections
// it reports then answer ConnStats. It sets the hello's port and settings
// from the ready line, and its version from version (nil: the ready line's
// as it is), which may refuse the program with an error.
func (p *PeerServer) RunProgram(ctx context.Context, argv, env []string, conf ProgramConfig, version func(ProgramReady) (string, error)) error {
	confFile := filepath.Join(p.dir, "config.json")
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(confFile, b, 0o600); err != nil {
		return err
	}
	cmd := exec.Command(argv[0], append(slices.Clone(argv[1:]), "--config", confFile)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = p.Stderr(nil)
	if err := p.Start(cmd); err != nil {
		return err
	}
	p.stats = true
	ready := make(chan ProgramReady, 1)
	go p.readProgram(stdout, ready)
	var r ProgramReady
	select {
	case r = <-ready:
	case <-p.exited:
		return errors.New("exited before it listened")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("not listening after 30 s")
	}
	v := r.Version
	if version != nil {
		var err error
		if v, err = version(r); err != nil {
			return err
		}
	}
	p.SetInfo(r.Port, v, map[string]string{
		"cc":                model.CCName(r.CC),
		"max_datagram_size": strconv.Itoa(r.MaxDatagramSize),
		"max_data":          strconv.Itoa(conf.MaxData),
		"max_stream_data":   strconv.Itoa(conf.MaxStreamData),
		"udp_rcvbuf":        strconv.Itoa(r.RcvBuf),
	})
	return nil
}

// readProgram reads a program peer's output: its ready line (sent to
// ready), then the start and end of each connection.
func (p *PeerServer) readProgram(r io.Reader, ready chan<- ProgramReady) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	gotReady := false
	for sc.Scan() {
		var l programLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			p.logf("%s: unexpected output %q", p.cfg.Impl, sc.Text())
			continue
		}
		switch {
		case l.Ready != nil && !gotReady:
			gotReady = true
			ready <- *l.Ready
		case l.Open != "":
			ref := p.book.open("quic", l.Open)
			addr := l.Open
			p.book.watch(ref, func(ctx context.Context) (model.TransportStats, error) { return p.readOpen(ctx, addr) })
			p.mu.Lock()
			p.refs[l.Open] = ref
			p.mu.Unlock()
		case l.Live != "":
			p.mu.Lock()
			asks := p.asks[l.Live]
			delete(p.asks, l.Live)
			p.mu.Unlock()
			for _, ch := range asks {
				ch <- l.Stats // buffered, one value each
			}
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
	_, _ = io.Copy(io.Discard, r)
}

// readOpen asks the program for the statistics of its open connection
// from addr: the line {"stats": ADDR} on its input, answered by
// {"live": ADDR, "stats": {...}} on its output ({"live": ADDR} alone when
// it has no such connection).
func (p *PeerServer) readOpen(ctx context.Context, addr string) (model.TransportStats, error) {
	if p.stdin == nil {
		return model.TransportStats{}, errors.New("the program's input is not a pipe")
	}
	ch := make(chan *programStats, 1)
	p.mu.Lock()
	p.asks[addr] = append(p.asks[addr], ch)
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.asks[addr] = slices.DeleteFunc(p.asks[addr], func(c chan *programStats) bool { return c == ch })
		if len(p.asks[addr]) == 0 {
			delete(p.asks, addr)
		}
	}
	line, _ := json.Marshal(map[string]string{"stats": addr})
	p.stdinMu.Lock()
	_, err := p.stdin.Write(append(line, '\n'))
	p.stdinMu.Unlock()
	if err != nil {
		forget()
		return model.TransportStats{}, fmt.Errorf("asking %s: %w", p.cfg.Impl, err)
	}
	select {
	case st := <-ch:
		if st == nil {
			return model.TransportStats{}, fmt.Errorf("%s has no open connection from %s", p.cfg.Impl, addr)
		}
		return st.transport(), nil
	case <-ctx.Done():
		forget()
		return model.TransportStats{}, fmt.Errorf("%s did not answer for its open connection from %s: %w", p.cfg.Impl, addr, ctx.Err())
	}
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

// ProcessID is the server process's ID (0 before it started).
func (p *PeerServer) ProcessID() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitCode is the server process's exit status once it exited (-1
// before, or when a signal ended it).
func (p *PeerServer) ExitCode() int {
	select {
	case <-p.exited:
	default:
		return -1
	}
	if p.cmd == nil || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

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
// once it has ended: a program peer reports its QUIC connections (the end
// lines of RunProgram), a launcher may read them itself
// (SetStatsSource); other peers report none. When ctx's deadline passes
// first, a program peer is asked for the connection's statistics while it
// is open, returned with ErrStillOpen.
func (p *PeerServer) ConnStats(ctx context.Context, kind, addr string) (model.TransportStats, error) {
	if p.statsSource != nil {
		return p.statsSource(ctx, kind, addr)
	}
	switch {
	case !p.stats:
		return model.TransportStats{}, fmt.Errorf("%s reports no transport statistics", p.cfg.Impl)
	case kind != "quic":
		return model.TransportStats{}, fmt.Errorf("%s reports QUIC connections only, no %s connection", p.cfg.Impl, kind)
	}
	return p.book.wait(ctx, kind, addr)
}

// Close stops the peer (end of its input, SIGTERM to its process group,
// SIGKILL after 3 s), removes its scratch directory and restores the
// namespace's congestion control. It is safe to call more than once.
func (p *PeerServer) Close() error {
	p.closeOnce.Do(func() {
		if p.cmd != nil && p.cmd.Process != nil {
			if p.stdin != nil {
				_ = p.stdin.Close()
			}
			pgid := p.cmd.Process.Pid
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(3 * time.Second):
			}
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // the child and anything it left
			<-p.exited
		}
		for _, f := range slices.Backward(p.closers) {
			f()
		}
		if p.dir != "" {
			// never through a mount point (a contract stack's root)
			if err := safefs.RemoveAll(p.dir); err != nil {
				p.logf("%s: %v", p.cfg.Impl, err)
			}
		}
	})
	return nil
}

// Start starts cmd, the server's process, in a process group of its own
// that gets SIGKILL when this process dies (PR_SET_PDEATHSIG fires when
// the starting thread exits, so the starting goroutine keeps its thread
// until the child ends). Its standard input is a pipe that Close closes
// (the end of input stops a program peer). A server has one process.
// Attributes the command already has (a contract stack's new mount
// namespace) are kept.
func (p *PeerServer) Start(cmd *exec.Cmd) error {
	if p.cmd != nil {
		return errors.New("endpoint: a peer server runs one process")
	}
	if cmd.Stdin == nil {
		var err error
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
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

// NamespaceCC makes the network namespace's default TCP congestion control
// the configured one (for a server that cannot choose its sockets' own:
// they take the default), restoring it on Close, and returns what its
// sockets run. It never changes the host's: outside a namespace of its own
// it only accepts the default. Inside one (a testbed's), a default the
// kernel refuses (namespaces may default only to the algorithms of the
// host's net.ipv4.tcp_allowed_congestion_control) is left as it is: the
// testbed's routes impose the cell's algorithm on every connection across
// the link anyway (netns.Testbed.SetCC), and the runner checks each
// connection's from the kernel.
func (p *PeerServer) NamespaceCC() (string, error) {
	cur, err := os.ReadFile(sysCCPath)
	if err != nil {
		return "", fmt.Errorf("endpoint: %w", err)
	}
	have := strings.TrimSpace(string(cur))
	want := p.cfg.CongestionControl
	if want == "" || want == have {
		return have, nil
	}
	self, err1 := os.Readlink("/proc/thread-self/ns/net")
	// The host's namespace is init's; where /proc/1 is closed to us (a
	// sandbox), the parent's: a testbed's server is started by the runner,
	// which stays in the host's namespace, through nsenter(1), which execs.
	host, err2 := os.Readlink("/proc/1/ns/net")
	if err2 != nil {
		host, err2 = os.Readlink("/proc/" + strconv.Itoa(os.Getppid()) + "/ns/net")
	}
	if err1 != nil || err2 != nil || self == host {
		return "", fmt.Errorf("endpoint: %s cannot choose its sockets' congestion control, and the default here is %s, not %s; "+
			"quicbench changes the default only inside a network namespace of its own (a testbed): run with --cc %s or without --cc", p.cfg.Impl, have, want, have)
	}
	if err := os.WriteFile(sysCCPath, []byte(want), 0o644); err != nil {
		return want + " (by the testbed's routes; the namespace's default stays " + have + ")", nil
	}
	p.OnClose(func() { _ = os.WriteFile(sysCCPath, []byte(have), 0o644) })
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

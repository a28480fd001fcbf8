// Package netns builds quicbench's testbed: a client and a server network
// namespace, each with one TUN interface, joined by the userspace link
// emulator (package forward driving emu pipelines) that runs inside the
// quicbench process and acts as the router between them.
//
//	client ns                     quicbench process                 server ns
//	10.N.1.2/24 qbtun0 <-> [up: client->server pipeline ] <-> qbtun0 10.N.2.2/24
//	                       [down: server->client pipeline]
//
// By default the namespaces are held only by file descriptors of the
// quicbench process, and every command started in them gets
// PR_SET_PDEATHSIG, so nothing is left behind even if quicbench is killed.
// A persistent testbed (Config.Persist) is also bind-mounted under
// /run/netns (for `ip netns exec` and `quicbench testbed exec`) and recorded
// in /run/quicbench; Cleanup removes what a killed one leaves.
//
// Linux only; needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root, or root inside a
// user namespace: see Rootless).
package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/rtnl"
	"github.com/quicbench/quicbench/tun"
	"golang.org/x/sys/unix"
)

// Side names one end of the testbed.
type Side int

// The two ends of a testbed.
const (
	Client Side = iota
	Server
)

func (s Side) String() string {
	switch s {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return "Side(" + strconv.Itoa(int(s)) + ")"
}

// ParseSide parses "client" or "server".
func ParseSide(s string) (Side, error) {
	switch s {
	case "client":
		return Client, nil
	case "server":
		return Server, nil
	}
	return 0, fmt.Errorf("unknown side %q (want client or server)", s)
}

// Prefix starts the name of every namespace and state file quicbench makes.
const Prefix = "qb-"

// DeviceName is the name of the TUN interface in each namespace.
const DeviceName = "qbtun0"

// MTU of the TUN interfaces: the largest wire packet the link sees, and
// so the largest MTU a link spec may give (spec.MaxMTU).
const MTU = 1500

// Config describes a testbed.
type Config struct {
	// Name identifies the testbed: namespaces are "qb-<Name>-c" and
	// "qb-<Name>-s". Letters, digits, '_' and '-', at most 32 bytes. Empty
	// picks a random run id.
	Name string
	// Up (client->server) and Down (server->client) are the link
	// impairments; the zero Link is a plain pass-through.
	Up, Down spec.Link
	// Seed drives the pipelines' random decisions; the same seed gives the
	// same per-packet decisions. The up pipeline is built with Seed, the
	// down one with Seed^0x9e3779b97f4a7c15 (an independent stream).
	Seed uint64
	// CC is the TCP congestion control of every TCP connection between
	// the namespaces: "cubic" (the default when empty), "bbr" or "reno".
	// The testbed sets it on the route to the other namespace (congctl),
	// which the kernel applies to each connection over that route whatever
	// the socket or the namespace default asked for, and also tries to make
	// it the namespaces' default (see DefaultCC).
	CC string
	// Persist bind-mounts the namespaces under /run/netns and writes a
	// state file under /run/quicbench, so that other processes can enter
	// them. Runs leave it false: then nothing outlives the process.
	Persist bool
	// NoOffload turns off TSO/USO on the TUN devices: the forwarder then
	// moves one wire packet per system call (slower; impairments are per
	// wire packet either way).
	NoOffload bool
	// NoRealtime keeps the forwarding threads on the normal scheduler
	// instead of SCHED_FIFO (less precise timing on a busy machine).
	NoRealtime bool
	// NoTimerAdvance turns off the forwarder's early wake-up and short
	// busy-wait before each departure (forward.Options.TimerAdvance).
	NoTimerAdvance bool
	// Pin separates the emulator, the server and the client on CPUs of
	// their own as far as the machine allows (PinLayout): the forwarding
	// threads are pinned, and so is every command Testbed.Command starts,
	// by the side it runs on. New fails when there are not 2 CPUs to use.
	Pin bool
	// Tap, when not nil, records every packet across the link in the
	// forwarder's taps (forward.Options.Tap), for package capture.
	Tap *forward.TapOptions
}

// ErrConfig is wrapped by every error New and SetLink return for a bad
// configuration (name, congestion control, a link the emulator cannot
// build, such as a trace file that does not load), as opposed to a failure
// of the machine.
var ErrConfig = errors.New("invalid testbed configuration")

type configError struct{ err error }

func (e *configError) Error() string          { return e.err.Error() }
func (e *configError) Unwrap() []error        { return []error{e.err, ErrConfig} }
func configErr(format string, a ...any) error { return &configError{fmt.Errorf(format, a...)} }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Testbed is a running client/server namespace pair joined by the emulated
// link. Its methods are safe for concurrent use.
type Testbed struct {
	name      string // Config.Name or the generated run id
	subnet    int    // N in 10.N.1.0/24 and 10.N.2.0/24
	cc        string // congestion control on the routes across the link
	defaultCC string // the namespaces' default congestion control as applied
	ns        [2]*os.File
	nsIno     [2]uint64
	devs      [2]*tun.Device
	pools     [2]*emu.Pool // up, down
	// links are the pipelines the forwarder drives (up, down); spares the
	// ones SetLink retired, whose queue memory the next SetLink reuses.
	links, spares [2]*pipeline.Pipeline
	fwd           *forward.Forwarder
	mounts        []string
	state         string   // state file path, when persistent
	offload       bool     // TUN devices with TSO/USO (virtio_net_hdr)
	realtime      bool     // SCHED_FIFO forwarding threads
	advance       bool     // forward.Options.TimerAdvance
	offloads      int      // the TUN_F_* flags the devices accepted
	pin           *Pinning // Config.Pin's layout, nil when not pinned
	tap           *forward.TapOptions

	mu      sync.Mutex
	up      spec.Link
	down    spec.Link
	seed    uint64
	bufMax  int
	sysctls map[string]string
	closed  bool
}

// poolBufSize is the buffer size of pooled packets: one wire packet.
const poolBufSize = 2048

// Pool sizes, in packets per direction.
const (
	minPoolPackets = 4096
	maxPoolPackets = 65536 // 128 MiB of buffers, touched only as used
	poolSlack      = 1024
)

// poolPackets is how many packets a direction's pool needs for link l: the
// bottleneck queue's limit plus the packets in flight on the delay line
// (a bandwidth-delay product of MTU-sized packets at the link's rate, or at
// assumedRateBps without one), twice that with duplication. Without a
// bottleneck, nothing bounds the delay line but the senders' windows, so it
// also covers one full socket buffer (bufMax) of 1448-byte segments. When
// the pool runs dry, the forwarder drops and counts it (Stats.PoolEmpty).
func poolPackets(l spec.Link, bufMax int) int {
	rate := l.RateBps()
	if rate == 0 {
		rate = assumedRateBps
	}
	n := float64(rate) / 8 / wireMTU * l.MaxDelay().Seconds()
	if pk, b := l.QueueLimit(); l.HasBottleneck() {
		q := pk
		if b > 0 && (q == 0 || int(b/64) < q) {
			q = int(b / 64) // a byte limit admits at most b/64 small packets
		}
		n += float64(q)
	}
	if !l.HasBottleneck() && l.MaxDelay() > 0 {
		n = max(n, float64(bufMax)/1448)
	}
	if l.Duplicate > 0 {
		n *= 2
	}
	return min(max(int(n)+poolSlack, minPoolPackets), maxPoolPackets)
}

// New validates cfg (including building both pipelines) before it creates
// anything, then builds the testbed. On error nothing is left behind.
func New(ctx context.Context, cfg Config) (*Testbed, error) {
	if cfg.Name == "" {
		cfg.Name = randomID()
	}
	if !nameRE.MatchString(cfg.Name) {
		return nil, configErr("testbed name %q: want 1 to 32 letters, digits, '_' or '-'", cfg.Name)
	}
	if cfg.CC == "" {
		cfg.CC = defaultCC
	}
	if err := checkCC(cfg.CC); err != nil {
		return nil, &configError{err}
	}
	t := &Testbed{name: cfg.Name, cc: cfg.CC, up: cfg.Up, down: cfg.Down, seed: cfg.Seed, offload: !cfg.NoOffload, realtime: !cfg.NoRealtime, advance: !cfg.NoTimerAdvance, tap: cfg.Tap}
	if cfg.Pin {
		cpus, err := AllowedCPUs()
		if err != nil {
			return nil, err
		}
		pin, err := PinLayout(cpus)
		if err != nil {
			return nil, configErr("pin: %w", err)
		}
		t.pin = &pin
	}
	t.bufMax = bufferMax(linkRate(cfg.Up, cfg.Down), cfg.Up.MaxDelay()+cfg.Down.MaxDelay(), linkQueueBytes(cfg.Up, cfg.Down))
	t.pools = [2]*emu.Pool{emu.NewPool(poolPackets(cfg.Up, t.bufMax), poolBufSize), emu.NewPool(poolPackets(cfg.Down, t.bufMax), poolBufSize)}
	upP, downP, err := buildPipelines(cfg.Up, cfg.Down, cfg.Seed, t.pools, [2]*pipeline.Pipeline{})
	if err != nil {
		return nil, err
	}
	t.links = [2]*pipeline.Pipeline{upP, downP}
	if cfg.Persist {
		for _, s := range []Side{Client, Server} {
			if _, err := os.Lstat("/run/netns/" + t.NSName(s)); err == nil {
				return nil, configErr("testbed %q already exists (/run/netns/%s); stop it with `quicbench testbed down --name %s` or run `quicbench cleanup`",
					t.name, t.NSName(s), t.name)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.subnet = allocSubnet()
	if err := t.build(upP, downP); err != nil {
		t.Close()
		return nil, err
	}
	if cfg.Persist {
		if err := t.persist(); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

func buildPipelines(up, down spec.Link, seed uint64, pools [2]*emu.Pool, reuse [2]*pipeline.Pipeline) (*pipeline.Pipeline, *pipeline.Pipeline, error) {
	upP, err := pipeline.NewReusing(up, seed, pools[0], reuse[0])
	if err != nil {
		return nil, nil, configErr("up link %q: %w", up.String(), err)
	}
	// The down direction gets its own stream of random decisions.
	downP, err := pipeline.NewReusing(down, seed^0x9e3779b97f4a7c15, pools[1], reuse[1])
	if err != nil {
		return nil, nil, configErr("down link %q: %w", down.String(), err)
	}
	return upP, downP, nil
}

// build creates the namespaces, devices, addresses, routes and sysctls and
// starts the forwarder.
func (t *Testbed) build(upP, downP *pipeline.Pipeline) error {
	sysctls := map[string]string{}
	for _, s := range []Side{Client, Server} {
		f, err := NewNamespace()
		if err != nil {
			return fmt.Errorf("%s namespace: %w", s, err)
		}
		t.ns[s] = f
		if t.nsIno[s], err = nsInode(int(f.Fd())); err != nil {
			return err
		}
		local, peer := t.prefix(s), t.prefix(1-s)
		err = InNamespace(int(f.Fd()), func() error {
			applied, err := t.applySysctls(t.bufMax)
			if err != nil {
				return err
			}
			if s == Client {
				for k, v := range applied {
					sysctls[k] = v
				}
			}
			dev, flags, err := createTUN(t.offload)
			if err != nil {
				return err
			}
			t.offloads = flags
			t.devs[s] = dev
			// The kernel drops what the device's ring cannot hold while the
			// forwarder is busy; one entry is a whole super-packet with
			// offloads, a single wire packet without, hence a longer ring.
			txqlen := uint32(1000)
			if flags == 0 {
				txqlen = 4000
			}
			if err := rtnl.Configure(DeviceName, MTU, txqlen, local, peer.Masked()); err != nil {
				return err
			}
			return rtnl.RouteCC(peer.Masked(), DeviceName, t.cc)
		})
		if err != nil {
			return fmt.Errorf("%s namespace %s: %w", s, t.NSName(s), err)
		}
	}
	t.sysctls = sysctls
	opts := forward.Options{Realtime: t.realtime, TimerAdvance: t.advance, Tap: t.tap}
	if t.pin != nil {
		opts.CPUs = t.pin.Emulator
	}
	fwd, err := forward.Start(emu.MonotonicClock(), opts,
		forward.Path{Name: "up", From: t.devs[Client], To: t.devs[Server], Link: upP, Pool: t.pools[0], Router: t.RouterAddr(Client)},
		forward.Path{Name: "down", From: t.devs[Server], To: t.devs[Client], Link: downP, Pool: t.pools[1], Router: t.RouterAddr(Server)},
	)
	if err != nil {
		return err
	}
	t.fwd = fwd
	return nil
}

// Offloads asked of the TUN devices: TCP and UDP segmentation, with USO
// dropped on kernels before 6.2.
const (
	offloadsFull  = tun.OffloadCsum | tun.OffloadTSO4 | tun.OffloadTSO6 | tun.OffloadECN | tun.OffloadUSO4 | tun.OffloadUSO6
	offloadsNoUSO = tun.OffloadCsum | tun.OffloadTSO4 | tun.OffloadTSO6 | tun.OffloadECN
)

// createTUN creates the testbed's TUN device in the calling thread's
// namespace, with offloads when asked and available, and returns the
// offload flags in effect.
func createTUN(withOffload bool) (*tun.Device, int, error) {
	if !withOffload {
		d, err := tun.Create(DeviceName, tun.Options{})
		return d, 0, err
	}
	var err error
	for _, flags := range []int{offloadsFull, offloadsNoUSO} {
		var d *tun.Device
		if d, err = tun.Create(DeviceName, tun.Options{VnetHdr: true, Offloads: flags}); err == nil {
			return d, flags, nil
		}
	}
	return nil, 0, err
}

// applySysctls writes the testbed's sysctls in the calling thread's
// namespace and returns what was applied and recorded.
func (t *Testbed) applySysctls(bufMax int) (map[string]string, error) {
	out := map[string]string{}
	writes := [][2]string{
		{sysIPv6All, "1"}, // no IPv6 chatter (router solicitations, MLD) on the link
		{sysIPv6Default, "1"},
		{sysRmem, bufferTriple(tcpRmemMin, tcpRmemDefault, bufMax)},
		{sysWmem, bufferTriple(tcpWmemMin, tcpWmemDefault, bufMax)},
		// No cached ssthresh/RTT from one sample's connection leaks into
		// the next one's.
		{sysNoMetrics, "1"},
	}
	for _, w := range writes {
		v, err := writeSysctl(w[0], w[1])
		if err != nil {
			return nil, err
		}
		out[w[0]] = v
	}
	v, err := setDefaultCC(t.cc)
	if err != nil {
		return nil, err
	}
	out[sysCC] = v
	t.defaultCC = v
	for _, k := range recordedSysctls {
		if v, err := readSysctl(k); err == nil {
			out[k] = v
		}
	}
	return out, nil
}

// setDefaultCC makes cc the calling thread's namespace's default
// congestion control where the host allows it, and returns the default in
// force. Outside the initial namespace the kernel only lets a namespace
// default to the algorithms listed in the host-global
// net.ipv4.tcp_allowed_congestion_control; quicbench never changes that,
// so a restricted choice keeps the inherited default (the routes across the
// link carry cc all the same).
func setDefaultCC(cc string) (string, error) {
	v, err := writeSysctl(sysCC, cc)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, unix.EPERM) {
		return "", err
	}
	return readSysctl(sysCC)
}

// SetCC switches the testbed to congestion control cc (as Config.CC):
// the routes across the link carry it, and the namespaces default to it
// where the host allows. Connections already open keep theirs; new ones
// get cc. On error the testbed may be left half switched; CC reports what
// the routes were last successfully given.
func (t *Testbed) SetCC(cc string) error {
	if err := checkCC(cc); err != nil {
		return &configError{err}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("testbed is closed")
	}
	var def string
	for _, s := range []Side{Client, Server} {
		err := InNamespace(int(t.ns[s].Fd()), func() error {
			if err := rtnl.RouteCC(t.prefix(1-s).Masked(), DeviceName, cc); err != nil {
				return err
			}
			var err error
			def, err = setDefaultCC(cc)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s namespace: %w", s, err)
		}
	}
	t.cc, t.defaultCC = cc, def
	t.sysctls[sysCC] = def
	return t.updateState()
}

// prefix is the address and prefix length of side s.
func (t *Testbed) prefix(s Side) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(t.subnet), byte(s) + 1, 2}), 24)
}

// RouterAddr is the emulated router's address on side s's subnet
// (10.N.1.1 or 10.N.2.1): the source of the ICMP messages the link sends
// that side (mtu ... icmp). No interface holds it; the side routes it
// through its TUN device.
func (t *Testbed) RouterAddr(s Side) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(t.subnet), byte(s) + 1, 1})
}

// Name is the testbed's name (Config.Name or the generated run id).
func (t *Testbed) Name() string { return t.name }

// Addr is the IPv4 address of side s.
func (t *Testbed) Addr(s Side) netip.Addr { return t.prefix(s).Addr() }

// NSName is the name of side s's namespace ("qb-<name>-c" or "qb-<name>-s");
// with Persist it is also its name under /run/netns.
func (t *Testbed) NSName(s Side) string {
	if s == Client {
		return Prefix + t.name + "-c"
	}
	return Prefix + t.name + "-s"
}

// CC is the TCP congestion control of every TCP connection between the
// namespaces (Config.CC, or "cubic"; SetCC changes it): the routes across
// the link carry it, so the kernel gives it to each such connection, even
// one whose program selected another algorithm on its socket.
func (t *Testbed) CC() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cc
}

// DefaultCC is the namespaces' default congestion control
// (net.ipv4.tcp_congestion_control): what a TCP socket gets until it
// connects, and keeps when its connection stays inside one namespace
// (loopback). It differs from CC when the host restricts which algorithms a
// namespace may default to (net.ipv4.tcp_allowed_congestion_control, a
// host-global setting quicbench does not change); RestrictedCCHint then
// explains it. Connections across the link get CC either way.
func (t *Testbed) DefaultCC() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.defaultCC
}

// Links returns the current link specs and seed.
func (t *Testbed) Links() (up, down spec.Link, seed uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.up, t.down, t.seed
}

// Sysctls returns the sysctls applied (and a few recorded) in both
// namespaces, which are configured identically.
func (t *Testbed) Sysctls() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]string, len(t.sysctls))
	for k, v := range t.sysctls {
		m[k] = v
	}
	return m
}

// Counters returns the link counters of the current pipelines (reset by
// SetLink). They are exact once the link is idle (the forwarder publishes
// them whenever it waits); during traffic they may lag by a few dozen
// packets.
func (t *Testbed) Counters() (up, down emu.Counters) {
	return t.fwd.Counters(0), t.fwd.Counters(1)
}

// ForwarderStats returns the forwarder's own counters per direction: what
// happened to packets outside the pipelines (device errors, pool
// exhaustion).
func (t *Testbed) ForwarderStats() (up, down forward.Stats) {
	return t.fwd.Stats(0), t.fwd.Stats(1)
}

// DeviceDrops returns how many packets the kernel dropped at the TUN
// devices before the emulator could read them (the device's ring was full
// while the forwarder was busy): up counts the client device, down the
// server's. They are losses the link counters do not see; a valid
// measurement has none.
func (t *Testbed) DeviceDrops() (up, down uint64, err error) {
	var drops [2]uint64
	for _, s := range []Side{Client, Server} {
		err := t.Do(s, func() error {
			b, err := os.ReadFile("/proc/thread-self/net/dev")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				name, rest, ok := strings.Cut(line, ":")
				if !ok || strings.TrimSpace(name) != DeviceName {
					continue
				}
				f := strings.Fields(rest)
				if len(f) < 12 {
					return fmt.Errorf("/proc/net/dev: short line %q", line)
				}
				drops[s], err = strconv.ParseUint(f[11], 10, 64) // TX drop
				return err
			}
			return fmt.Errorf("/proc/net/dev: no %s", DeviceName)
		})
		if err != nil {
			return 0, 0, err
		}
	}
	return drops[Client], drops[Server], nil
}

// Offloads names the segmentation offloads the TUN devices accepted
// ("tso4", "tso6", "tso-ecn", "uso4", "uso6", with "csum"), or nil when the
// forwarder moves one wire packet per system call.
func (t *Testbed) Offloads() []string {
	var out []string
	for _, o := range []struct {
		flag int
		name string
	}{{tun.OffloadCsum, "csum"}, {tun.OffloadTSO4, "tso4"}, {tun.OffloadTSO6, "tso6"}, {tun.OffloadECN, "tso-ecn"},
		{tun.OffloadUSO4, "uso4"}, {tun.OffloadUSO6, "uso6"}} {
		if t.offloads&o.flag != 0 {
			out = append(out, o.name)
		}
	}
	return out
}

// Pinning returns where the testbed's parts run (Config.Pin), and false
// when it is not pinned.
func (t *Testbed) Pinning() (Pinning, bool) {
	if t.pin == nil {
		return Pinning{}, false
	}
	return *t.pin, true
}

// ForwarderCPU returns the CPU time the emulator's forwarding threads have
// used so far; the difference over an interval is the emulator's cost.
func (t *Testbed) ForwarderCPU() time.Duration { return t.fwd.CPUTime() }

// SetLink reconfigures the link between samples: queued packets are
// dropped, both directions get new pipelines built with seed, and the
// socket buffer limits grow if the new link needs more. On error the old
// configuration stays.
func (t *Testbed) SetLink(up, down spec.Link, seed uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("testbed is closed")
	}
	bufMax := max(t.bufMax, bufferMax(linkRate(up, down), up.MaxDelay()+down.MaxDelay(), linkQueueBytes(up, down)))
	// A link that needs more packets in flight gets a bigger pool; the
	// forwarder switches pool and pipeline together.
	pools := t.pools
	var newPools [2]*emu.Pool
	for i, l := range []spec.Link{up, down} {
		if n := poolPackets(l, bufMax); n > pools[i].Cap() {
			newPools[i] = emu.NewPool(n, poolBufSize)
			pools[i] = newPools[i]
		}
	}
	// The spares were retired (flushed, no longer driven) by the previous
	// SetLink; a spare is lost to a failed SetLink, which only costs the
	// next one an allocation.
	upP, downP, err := buildPipelines(up, down, seed, pools, t.spares)
	t.spares = [2]*pipeline.Pipeline{}
	if err != nil {
		return err
	}
	if bufMax > t.bufMax {
		for _, s := range []Side{Client, Server} {
			err := InNamespace(int(t.ns[s].Fd()), func() error {
				for _, k := range []string{sysRmem, sysWmem} {
					min, def := tcpRmemMin, tcpRmemDefault
					if k == sysWmem {
						min, def = tcpWmemMin, tcpWmemDefault
					}
					v, err := writeSysctl(k, bufferTriple(min, def, bufMax))
					if err != nil {
						return err
					}
					t.sysctls[k] = v
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s namespace: %w", s, err)
			}
		}
		t.bufMax = bufMax
	}
	for i, p := range []*pipeline.Pipeline{upP, downP} {
		if err := t.fwd.SetLink(i, p, newPools[i]); err != nil {
			return err
		}
		// Forwarder.SetLink returns once its thread flushed the old
		// pipeline and drives the new one.
		t.spares[i], t.links[i] = t.links[i], p
	}
	t.pools = pools
	t.up, t.down, t.seed = up, down, seed
	return t.updateState()
}

// Do runs fn on a locked OS thread inside side s's namespace and returns
// its error: sockets fn opens belong to that namespace. Goroutines fn starts
// do not run in the namespace; processes fn starts die with that thread.
func (t *Testbed) Do(s Side, fn func() error) error {
	f, err := t.nsFile(s)
	if err != nil {
		return err
	}
	return InNamespace(int(f.Fd()), fn)
}

func (t *Testbed) nsFile(s Side) (*os.File, error) {
	if s != Client && s != Server {
		return nil, fmt.Errorf("invalid side %d", int(s))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("testbed is closed")
	}
	return t.ns[s], nil
}

// Command returns a command that runs name with arg inside side s's
// namespace (through nsenter(1)), with the working directory, environment
// and standard I/O of an ordinary exec.Cmd. The process gets SIGKILL when
// quicbench dies (Pdeathsig), and Close kills whatever still runs in the
// namespaces. Do not replace cmd.SysProcAttr; add to it.
func (t *Testbed) Command(ctx context.Context, s Side, name string, arg ...string) *exec.Cmd {
	_, err := t.nsFile(s)
	path := ""
	if err == nil {
		path = t.procNSPath(s)
	}
	cmd := nsCommand(ctx, path, name, arg...)
	if err != nil && cmd.Err == nil {
		cmd.Err = err
	}
	if t.pin != nil {
		cpus := t.pin.Client
		if s == Server {
			cpus = t.pin.Server
		}
		pinCommand(cmd, cpus)
	}
	return cmd
}

// procNSPath is a path through which other processes can open side s's
// namespace while this process holds it.
func (t *Testbed) procNSPath(s Side) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(t.ns[s].Fd()))
}

// CommandAt returns a command that runs name with arg inside the network
// namespace at nsPath (a bind mount, or /proc/PID/fd/N of a namespace file
// a live process holds), exactly as Testbed.Command does: through
// nsenter(1), SIGKILL when quicbench dies (Pdeathsig). The caller kills
// and reaps it; do not replace cmd.SysProcAttr.
func CommandAt(ctx context.Context, nsPath, name string, arg ...string) *exec.Cmd {
	return nsCommand(ctx, nsPath, name, arg...)
}

// nsCommand builds a command entering the network namespace at nsPath.
func nsCommand(ctx context.Context, nsPath, name string, arg ...string) *exec.Cmd {
	nsenter, lerr := exec.LookPath("nsenter")
	args := append([]string{"--net=" + nsPath, "--", name}, arg...)
	cmd := exec.CommandContext(ctx, nsenter, args...)
	if lerr != nil {
		cmd.Err = fmt.Errorf("running a command in a namespace needs nsenter (util-linux): %w", lerr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Close stops the forwarder, kills the processes left in the namespaces
// and removes the devices, namespaces, bind mounts and state file. It is
// idempotent.
func (t *Testbed) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	var errs []error
	if t.fwd != nil {
		errs = append(errs, t.fwd.Close())
	}
	var inodes []uint64
	for _, ino := range t.nsIno {
		if ino != 0 {
			inodes = append(inodes, ino)
		}
	}
	var args []string
	for _, s := range []Side{Client, Server} {
		if t.ns[s] != nil {
			args = append(args, "--net="+t.procNSPath(s))
		}
	}
	errs = append(errs, killAll(inodes, args))
	for _, d := range t.devs {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	for _, m := range t.mounts {
		errs = append(errs, unbindNetNS(m))
	}
	if t.state != "" {
		if err := os.Remove(t.state); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, f := range t.ns {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	freeSubnet(t.subnet)
	return errors.Join(errs...)
}

// killAll SIGKILLs every process in the namespaces (inodes) or on its way
// into them (an nsenter with one of args), and waits (up to 5 s) until two
// scans 20 ms apart find none: a command being started concurrently shows
// up in one of them.
func killAll(inodes []uint64, args []string) error {
	if len(inodes) == 0 && len(args) == 0 {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	quiet := 0
	for quiet < 2 {
		alive := 0
		for _, pid := range pidsInNetNS(inodes, args) {
			if processAlive(pid) {
				alive++
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		if alive == 0 {
			quiet++
		} else {
			quiet = 0
			if time.Now().After(deadline) {
				return fmt.Errorf("%d processes in the testbed namespaces did not exit", alive)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func linkRate(up, down spec.Link) uint64 {
	a, b := up.RateBps(), down.RateBps()
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// linkQueueBytes is the most a direction's bottleneck queue can hold, which
// adds to the delay a sender's window must cover.
func linkQueueBytes(up, down spec.Link) uint64 {
	var most uint64
	for _, l := range []spec.Link{up, down} {
		if !l.HasBottleneck() {
			continue
		}
		packets, q := l.QueueLimit()
		if p := uint64(packets) * wireMTU; packets > 0 && (q == 0 || p < q) {
			q = p
		}
		most = max(most, q)
	}
	return most
}

package netns

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/testsupport"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func requireRoot(t testing.TB) {
	t.Helper()
	testsupport.RequireRoot(t, "needs root (network namespaces and TUN devices)")
}

func mustLink(t testing.TB, s string) spec.Link {
	t.Helper()
	l, err := spec.Parse(s)
	if err != nil {
		t.Fatalf("spec.Parse(%q): %v", s, err)
	}
	return l
}

func newTestbed(t testing.TB, cfg Config) *Testbed {
	t.Helper()
	requireRoot(t)
	if cfg.Name == "" {
		cfg.Name = "t" + randomID()
	}
	tb, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tb
}

// listenUDP opens a UDP socket on side s's address.
func listenUDP(t testing.TB, tb *Testbed, s Side) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := tb.Do(s, func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tb.Addr(s), 0)))
		return err
	})
	if err != nil {
		t.Fatalf("listen UDP in %s: %v", s, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// udpEcho starts an echo server on the server side and returns its address.
func udpEcho(t testing.TB, tb *Testbed) netip.AddrPort {
	srv := listenUDP(t, tb, Server)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return srv.LocalAddr().(*net.UDPAddr).AddrPort()
}

// roundTrip sends one datagram to the echo server and waits for it.
func roundTrip(cli *net.UDPConn, to netip.AddrPort, timeout time.Duration) (time.Duration, error) {
	msg := make([]byte, 64)
	rand.Read(msg)
	start := time.Now()
	if _, err := cli.WriteToUDPAddrPort(msg, to); err != nil {
		return 0, err
	}
	cli.SetReadDeadline(start.Add(timeout))
	buf := make([]byte, 2048)
	for {
		n, _, err := cli.ReadFromUDPAddrPort(buf)
		if err != nil {
			return 0, err
		}
		if bytes.Equal(buf[:n], msg) {
			return time.Since(start), nil
		}
	}
}

// settled returns the testbed's counters once done accepts them (the
// forwarder publishes exact counters when it goes idle), or the last
// snapshot after 5 s.
func settled(tb *Testbed, done func(up, down emu.Counters) bool) (up, down emu.Counters) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		up, down = tb.Counters()
		if done(up, down) || time.Now().After(deadline) {
			return up, down
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPingUDPTCPAcrossForwarder(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"offload", Config{}},
		{"plain", Config{NoOffload: true, NoRealtime: true}},
	} {
		t.Run(c.name, func(t *testing.T) { testAcrossForwarder(t, c.cfg) })
	}
}

func testAcrossForwarder(t *testing.T, cfg Config) {
	tb := newTestbed(t, cfg)
	if tb.Addr(Client) == tb.Addr(Server) || !tb.Addr(Client).Is4() {
		t.Fatalf("addresses %v %v", tb.Addr(Client), tb.Addr(Server))
	}

	t.Run("ping", func(t *testing.T) {
		var c *icmp.PacketConn
		if err := tb.Do(Client, func() (err error) {
			c, err = icmp.ListenPacket("ip4:icmp", tb.Addr(Client).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 7, Seq: 1, Data: []byte("quicbench")}}
		b, _ := msg.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: tb.Addr(Server).AsSlice()}); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				t.Fatalf("no echo reply: %v", err)
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			if from.String() != tb.Addr(Server).String() {
				t.Fatalf("reply from %v", from)
			}
			if e := m.Body.(*icmp.Echo); string(e.Data) != "quicbench" {
				t.Fatalf("reply data %q", e.Data)
			}
			return
		}
	})

	t.Run("udp", func(t *testing.T) {
		to := udpEcho(t, tb)
		cli := listenUDP(t, tb, Client)
		before, _ := tb.Counters()
		for i := 0; i < 10; i++ {
			if _, err := roundTrip(cli, to, 5*time.Second); err != nil {
				t.Fatalf("round trip %d: %v", i, err)
			}
		}
		up, down := settled(tb, func(up, down emu.Counters) bool {
			return up.Sub(before).PacketsOut >= 10 && down.PacketsOut >= 10
		})
		if d := up.Sub(before).PacketsOut; d < 10 {
			t.Fatalf("up counters delivered %d packets, want >= 10", d)
		}
		if down.PacketsOut < 10 {
			t.Fatalf("down counters delivered %d packets, want >= 10", down.PacketsOut)
		}
	})

	t.Run("tcp", func(t *testing.T) {
		var ln net.Listener
		if err := tb.Do(Server, func() (err error) {
			ln, err = net.Listen("tcp4", netip.AddrPortFrom(tb.Addr(Server), 0).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		payload := make([]byte, 4<<20)
		rand.Read(payload)
		got := make(chan []byte, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer c.Close()
			b, _ := io.ReadAll(c)
			got <- b
		}()
		var c net.Conn
		if err := tb.Do(Client, func() (err error) {
			c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		c.Close()
		select {
		case b := <-got:
			if !bytes.Equal(b, payload) {
				t.Fatalf("server received %d bytes, want the %d sent", len(b), len(payload))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("TCP transfer did not finish")
		}
		up, _ := settled(tb, func(up, _ emu.Counters) bool { return up.BytesOut >= uint64(len(payload)) })
		if up.BytesOut < uint64(len(payload)) {
			t.Fatalf("up counters carried %d bytes, less than the %d-byte payload", up.BytesOut, len(payload))
		}
		// The pipeline sees wire packets (at most MTU bytes), never
		// super-packets, whatever the devices hand over.
		if max := uint64(MTU); up.BytesIn/up.PacketsIn > max || up.PacketsIn < uint64(len(payload))/max {
			t.Fatalf("up counters %d packets for %d bytes: not wire packets", up.PacketsIn, up.BytesIn)
		}
		us, _ := tb.ForwarderStats()
		t.Logf("%d device reads carried %d wire packets", us.Reads, up.PacketsIn)
		if _, _, err := tb.DeviceDrops(); err != nil {
			t.Fatalf("DeviceDrops: %v", err)
		}
	})
}

func TestDelayShowsInRTT(t *testing.T) {
	const delay = 20 * time.Millisecond
	tb := newTestbed(t, Config{Up: mustLink(t, "delay 20ms"), Down: mustLink(t, "delay 20ms")})
	to := udpEcho(t, tb)
	cli := listenUDP(t, tb, Client)
	for i := 0; i < 5; i++ {
		rtt, err := roundTrip(cli, to, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if rtt < 2*delay {
			t.Fatalf("RTT %v is shorter than the configured 2 x %v", rtt, delay)
		}
	}
}

func TestLoss100DropsEverything(t *testing.T) {
	tb := newTestbed(t, Config{Up: mustLink(t, "loss 100%")})
	to := udpEcho(t, tb)
	cli := listenUDP(t, tb, Client)
	const n = 20
	for i := 0; i < n; i++ {
		if _, err := roundTrip(cli, to, 50*time.Millisecond); err == nil {
			t.Fatal("a datagram crossed a link with 100% loss")
		}
	}
	up, down := settled(tb, func(up, _ emu.Counters) bool { return up.PacketsIn >= n })
	if up.PacketsIn < n || up.DropLoss != up.PacketsIn || up.PacketsOut != 0 {
		t.Fatalf("up counters %+v: want all of >= %d packets dropped by loss", up, n)
	}
	if down.PacketsIn != 0 {
		t.Fatalf("down counters %+v: nothing should have come back", down)
	}
}

func TestSetLinkChangesBehaviour(t *testing.T) {
	tb := newTestbed(t, Config{Up: mustLink(t, "loss 100%")})
	to := udpEcho(t, tb)
	cli := listenUDP(t, tb, Client)
	if _, err := roundTrip(cli, to, 50*time.Millisecond); err == nil {
		t.Fatal("datagram crossed a 100% loss link")
	}
	if err := tb.SetLink(mustLink(t, "delay 30ms"), spec.Link{}, 7); err != nil {
		t.Fatal(err)
	}
	up, _ := tb.Counters()
	if up.DropLoss != 0 {
		t.Fatalf("counters not reset by SetLink: %+v", up)
	}
	rtt, err := roundTrip(cli, to, 5*time.Second)
	if err != nil {
		t.Fatalf("after SetLink: %v", err)
	}
	if rtt < 30*time.Millisecond {
		t.Fatalf("RTT %v after SetLink to delay 30ms", rtt)
	}
	if u, _, s := tb.Links(); u.String() != "delay 30ms" || s != 7 {
		t.Fatalf("Links() = %q seed %d", u.String(), s)
	}
}

// netnsGone reports why the namespace with inode ino still exists, or "".
func netnsGone(ino uint64) string {
	tag := fmt.Sprintf("net:[%d]", ino)
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), tag) {
		return "still mounted"
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); l == tag && processAlive(pid) {
			return fmt.Sprintf("process %d is in it", pid)
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == tag {
				return fmt.Sprintf("process %d holds it open", pid)
			}
		}
	}
	return ""
}

// netFDs counts this process's open namespace files.
func netFDs() int {
	n := 0
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); strings.HasPrefix(l, "net:[") {
			n++
		}
	}
	return n
}

func TestCloseRemovesEverything(t *testing.T) {
	requireRoot(t)
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprintf("persist=%v", persist), func(t *testing.T) {
			name := "t" + randomID()
			tb, err := New(context.Background(), Config{Name: name, Persist: persist})
			if err != nil {
				t.Fatal(err)
			}
			ino := tb.nsIno
			// A process running in the namespace must not keep it alive.
			sleeper := tb.Command(context.Background(), Server, "sleep", "1000")
			if err := sleeper.Start(); err != nil {
				tb.Close()
				t.Fatal(err)
			}
			if persist {
				out, err := exec.Command("ip", "netns", "list").Output()
				if err != nil || !strings.Contains(string(out), tb.NSName(Client)) {
					t.Errorf("ip netns list = %q (%v), want %s", out, err, tb.NSName(Client))
				}
				if _, err := Lookup(name); err != nil {
					t.Errorf("Lookup: %v", err)
				}
			}
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tb.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			sleeper.Wait()
			for s, i := range ino {
				if why := netnsGone(i); why != "" {
					t.Errorf("%s namespace survived Close: %s", Side(s), why)
				}
			}
			out, _ := exec.Command("ip", "netns", "list").Output()
			if strings.Contains(string(out), name) {
				t.Errorf("ip netns list still shows %s: %s", name, out)
			}
			if _, err := os.Stat(statePath(name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left: %v", err)
			}
			if err := tb.Do(Client, func() error { return nil }); err == nil {
				t.Error("Do after Close succeeded")
			}
		})
	}
}

func TestDeviceInsideNamespace(t *testing.T) {
	tb := newTestbed(t, Config{})
	err := tb.Do(Client, func() error {
		ifc, err := net.InterfaceByName(DeviceName)
		if err != nil {
			return err
		}
		if ifc.MTU != MTU || ifc.Flags&net.FlagUp == 0 {
			return fmt.Errorf("interface %+v: want MTU %d and up", ifc, MTU)
		}
		addrs, _ := ifc.Addrs()
		if len(addrs) != 1 || !strings.HasPrefix(addrs[0].String(), tb.Addr(Client).String()+"/24") {
			return fmt.Errorf("addresses %v, want %v/24", addrs, tb.Addr(Client))
		}
		lo, err := net.InterfaceByName("lo")
		if err != nil || lo.Flags&net.FlagUp == 0 {
			return fmt.Errorf("loopback not up: %+v %v", lo, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The host namespace has no such interface.
	if _, err := net.InterfaceByName(DeviceName); err == nil {
		t.Fatalf("%s exists in the host namespace", DeviceName)
	}
}

func TestSysctlsArePerNamespace(t *testing.T) {
	requireRoot(t)
	keys := []string{sysCC, sysRmem, sysWmem, sysNoMetrics, sysIPv6All}
	host := map[string]string{}
	for _, k := range keys {
		v, err := readSysctl(k)
		if err != nil {
			t.Fatal(err)
		}
		host[k] = v
	}
	cc := "reno"
	if host[sysCC] == "reno" {
		cc = "cubic"
	}
	tb := newTestbed(t, Config{CC: cc, Up: mustLink(t, "delay 50ms"), Down: mustLink(t, "delay 50ms")})
	for _, k := range keys {
		if v, _ := readSysctl(k); v != host[k] {
			t.Errorf("host %s changed from %q to %q", k, host[k], v)
		}
	}
	applied := tb.Sysctls()
	if applied[sysCC] != cc || tb.CC() != cc {
		t.Errorf("recorded %s = %q, want %q", sysCC, applied[sysCC], cc)
	}
	// 10 Gbit/s assumed x 100 ms RTT x 2 = 250 MB.
	wantMax := bufferMax(0, 100*time.Millisecond, 0)
	for _, s := range []Side{Client, Server} {
		err := tb.Do(s, func() error {
			for k, want := range map[string]string{
				sysCC:        cc,
				sysRmem:      bufferTriple(tcpRmemMin, tcpRmemDefault, wantMax),
				sysWmem:      bufferTriple(tcpWmemMin, tcpWmemDefault, wantMax),
				sysNoMetrics: "1",
				sysIPv6All:   "1",
			} {
				got, err := readSysctl(k)
				if err != nil {
					return err
				}
				if got != want || applied[k] != want {
					return fmt.Errorf("%s = %q (recorded %q), want %q", k, got, applied[k], want)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	// A larger link grows the buffers.
	if err := tb.SetLink(mustLink(t, "delay 200ms"), mustLink(t, "delay 200ms"), 1); err != nil {
		t.Fatal(err)
	}
	grown := bufferMax(0, 400*time.Millisecond, 0)
	if got := tb.Sysctls()[sysWmem]; got != bufferTriple(tcpWmemMin, tcpWmemDefault, grown) {
		t.Errorf("after SetLink %s = %q, want max %d", sysWmem, got, grown)
	}
}

func TestBufferMax(t *testing.T) {
	for _, c := range []struct {
		rate  uint64
		rtt   time.Duration
		queue uint64
		want  int
	}{
		{0, 0, 0, minBufferMax},
		{10_000_000, 20 * time.Millisecond, 0, minBufferMax},         // 25 kB BDP
		{100_000_000, 200 * time.Millisecond, 0, minBufferMax},       // 2.5 MB BDP, x2 < 16 MiB
		{0, 20 * time.Millisecond, 0, 48 << 20},                      // 10 Gbit/s x 20 ms = 25 MB, x2 = 50 MB -> 48 MiB
		{1_000_000_000, 100 * time.Millisecond, 1_500_000, 27 << 20}, // (12.5 + 1.5) MB x 2 = 28 MB -> 27 MiB
		{0, 10 * time.Second, 0, maxBufferMax},                       // capped
	} {
		if got := bufferMax(c.rate, c.rtt, c.queue); got != c.want {
			t.Errorf("bufferMax(%d, %v, %d) = %d, want %d", c.rate, c.rtt, c.queue, got, c.want)
		}
	}
}

func TestBadConfigCreatesNothing(t *testing.T) {
	requireRoot(t)
	before := netFDs()
	missingTrace := mustLink(t, "trace "+t.TempDir()+"/missing.trace")
	for _, cfg := range []Config{
		{Name: "bad name!"},
		{Name: strings.Repeat("x", 33)},
		{CC: "vegas"},
		{CC: "cubic; rm"},
		{Name: "badtrace", Down: missingTrace, Persist: true},
	} {
		tb, err := New(context.Background(), cfg)
		if err == nil {
			tb.Close()
			t.Errorf("New(%+v) succeeded", cfg)
			continue
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): %v does not wrap ErrConfig", cfg, err)
		}
	}
	if _, err := Lookup("badtrace"); !errors.Is(err, ErrNotFound) {
		t.Errorf("failed New left state: %v", err)
	}
	if after := netFDs(); after != before {
		t.Fatalf("namespace files open: %d before, %d after", before, after)
	}
	if ents, _ := os.ReadDir("/run/netns"); len(ents) > 0 {
		for _, e := range ents {
			if strings.Contains(e.Name(), "bad") {
				t.Errorf("left %s", e.Name())
			}
		}
	}
}

func TestPersistNameCollision(t *testing.T) {
	tb := newTestbed(t, Config{Persist: true})
	before := netFDs()
	if _, err := New(context.Background(), Config{Name: tb.Name(), Persist: true}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second testbed with the same name: %v", err)
	}
	if netFDs() != before {
		t.Fatal("failed New left a namespace open")
	}
	info, err := Lookup(tb.Name())
	if err != nil {
		t.Fatal(err)
	}
	if info.PID != os.Getpid() || info.ClientAddr != tb.Addr(Client) || info.ServerNS != tb.NSName(Server) || !info.Alive() {
		t.Fatalf("state %+v", info)
	}
	// Another process can enter the namespace by its bind mount.
	out, err := info.Command(context.Background(), Server, "cat", "/proc/net/dev").Output()
	if err != nil || !strings.Contains(string(out), DeviceName) {
		t.Fatalf("command in %s: %v %s", info.NSPath(Server), err, out)
	}
	// Cleanup leaves a live testbed alone.
	removed, err := Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range removed {
		if strings.Contains(r, tb.Name()) {
			t.Fatalf("Cleanup removed live %s", r)
		}
	}
	if _, err := Lookup(tb.Name()); err != nil {
		t.Fatalf("Cleanup removed the live testbed: %v", err)
	}
}

func TestCommand(t *testing.T) {
	tb := newTestbed(t, Config{})
	out, err := tb.Command(context.Background(), Client, "cat", "/proc/net/fib_trie").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), tb.Addr(Client).String()) || strings.Contains(string(out), tb.Addr(Server).String()+"\n") && false {
		t.Fatalf("fib_trie of the client namespace lacks %v:\n%s", tb.Addr(Client), out)
	}
	err = tb.Command(context.Background(), Server, "sh", "-c", "exit 7").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit code: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := tb.Command(ctx, Client, "sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := cmd.Wait(); err == nil {
		t.Fatal("cancelled command exited cleanly")
	}
}

// The killed-process test re-executes the test binary as a helper that
// builds a testbed, starts a child in it, reports, and waits to be killed.
const helperEnv = "QUICBENCH_NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

type helperReport struct {
	Name     string
	Inodes   [2]uint64
	ChildPID int
}

func helper(mode string) int {
	switch mode {
	case "rootless-parent":
		cmd := RootlessCommand(context.Background(), os.Args[0], "-test.run=^$")
		cmd.Env = append(cmd.Env, helperEnv+"=rootless-child")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "rootless child:", err)
			return 1
		}
		return 0
	case "rootless-child":
		return rootlessChild()
	case "rootless-privtun":
		return rootlessPrivateTUN()
	}
	tb, err := New(context.Background(), Config{Name: os.Getenv(helperEnv + "_NAME"), Persist: mode == "persist",
		Up: must(spec.Parse("delay 5ms"))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	child := tb.Command(context.Background(), Client, "sleep", "1000")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(helperReport{tb.Name(), tb.nsIno, child.Process.Pid})
	select {}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestKilledProcessLeavesNothing(t *testing.T) {
	requireRoot(t)
	for _, mode := range []string{"ephemeral", "persist"} {
		t.Run(mode, func(t *testing.T) {
			name := "t" + randomID()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperEnv+"_NAME="+name)
			cmd.Stderr = os.Stderr
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var rep helperReport
			line, err := bufio.NewReader(stdout).ReadBytes('\n')
			if err != nil || json.Unmarshal(line, &rep) != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper report %q: %v", line, err)
			}
			if !processAlive(rep.ChildPID) {
				t.Fatal("child not running before the kill")
			}
			cmd.Process.Signal(unix.SIGKILL)
			cmd.Wait()
			// The child dies with its parent (Pdeathsig).
			deadline := time.Now().Add(5 * time.Second)
			for processAlive(rep.ChildPID) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if processAlive(rep.ChildPID) {
				unix.Kill(rep.ChildPID, unix.SIGKILL)
				t.Fatal("child survived its quicbench process")
			}
			if mode == "persist" {
				if _, err := os.Stat("/run/netns/" + Prefix + name + "-c"); err != nil {
					t.Fatalf("persistent namespace should survive the kill until Cleanup: %v", err)
				}
				removed, err := Cleanup(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				found := 0
				for _, r := range removed {
					if strings.Contains(r, name) {
						found++
					}
				}
				if found != 3 {
					t.Errorf("Cleanup removed %q, want both namespaces and the state of %s", removed, name)
				}
				if _, err := Lookup(name); !errors.Is(err, ErrNotFound) {
					t.Errorf("state survived Cleanup: %v", err)
				}
			}
			for s, ino := range rep.Inodes {
				if why := netnsGone(ino); why != "" {
					t.Errorf("%s namespace survived: %s", Side(s), why)
				}
			}
		})
	}
}

// rootlessChild runs as root inside a user namespace made by
// RootlessCommand for an ordinary user: it builds a testbed and sends a
// datagram across it.
func rootlessChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	if !InRootless() {
		return fail(errors.New("InRootless() is false in the re-executed child"))
	}
	tb, err := New(context.Background(), Config{Up: must(spec.Parse("delay 5ms"))})
	if err != nil {
		return fail(err)
	}
	defer tb.Close()
	var srv, cli *net.UDPConn
	if err := tb.Do(Server, func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tb.Addr(Server), 0)))
		return err
	}); err != nil {
		return fail(err)
	}
	if err := tb.Do(Client, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fail(err)
	}
	cli.Write([]byte("rootless"))
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := srv.Read(buf)
	if err != nil || string(buf[:n]) != "rootless" {
		return fail(fmt.Errorf("datagram across the rootless testbed: %q %v", buf[:n], err))
	}
	out, err := tb.Command(context.Background(), Client, "cat", "/proc/net/dev").Output()
	if err != nil || !strings.Contains(string(out), DeviceName) {
		return fail(fmt.Errorf("command in the rootless client namespace: %v", err))
	}
	fmt.Printf("rootless ok uid=%d\n", os.Getuid())
	return 0
}

func TestRootlessAsOrdinaryUser(t *testing.T) {
	requireRoot(t)
	dir := testsupport.NobodyDir(t, "qbrootless")
	if err := UserNamespaceSupport(); err == nil {
		out, err := runRootlessAsNobody(dir)
		if err != nil || !strings.Contains(out, "rootless ok uid=0") {
			t.Fatalf("rootless testbed as nobody: %v\n%s", err, out)
		}
		return
	} else if tunAccessible(tunPath) == nil {
		testsupport.Unavailable(t, "unprivileged user namespaces unavailable: %v", err)
	}
	var before unix.Stat_t
	if err := unix.Stat(tunPath, &before); err != nil {
		t.Fatal(err)
	}
	// The host's TUN node is closed to ordinary users (mode 0600). Rather
	// than change it, give the test a node of its own: a re-executed copy
	// of this binary, in a private mount namespace, mounts a tmpfs, makes a
	// 0666 TUN node there and binds it over /dev/net/tun, visible to its
	// own process tree only, then runs the test as nobody.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=rootless-privtun", helperEnv+"_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes its mounts private
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == skipExit {
		testsupport.Unavailable(t, "with a private 0666 TUN node: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "rootless ok uid=0") {
		t.Fatalf("rootless testbed as nobody, with a private TUN node: %v\n%s", err, out)
	}
	// The host's node is untouched.
	var st unix.Stat_t
	if err := unix.Stat(tunPath, &st); err != nil || st.Mode != before.Mode || st.Ino != before.Ino {
		t.Errorf("host %s after the test: mode %04o inode %d, before %04o inode %d (%v)", tunPath, st.Mode&0o7777, st.Ino, before.Mode&0o7777, before.Ino, err)
	}
}

// skipExit is the exit code of a helper that found rootless mode
// unavailable for a reason other than the TUN node's mode.
const skipExit = 3

// runRootlessAsNobody runs the test binary as user nobody, from a copy in
// dir, in the rootless-parent helper mode; it returns the output.
func runRootlessAsNobody(dir string) (string, error) {
	return testsupport.RunAsNobody(dir, []string{helperEnv + "=rootless-parent"}, "-test.run=^$")
}

// rootlessPrivateTUN runs in a private mount namespace (as root): it gives
// this process tree a TUN node that ordinary users may open, then runs the
// rootless test as nobody.
func rootlessPrivateTUN() int {
	dir := os.Getenv(helperEnv + "_DIR")
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	if err := testsupport.BindPrivateTUN(dir); err != nil {
		return fail(err)
	}
	if err := UserNamespaceSupport(); err != nil {
		fmt.Println(err)
		return skipExit
	}
	out, err := runRootlessAsNobody(dir)
	fmt.Print(out)
	if err != nil {
		return fail(err)
	}
	return 0
}

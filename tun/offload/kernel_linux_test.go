//go:build linux

package offload

// Real-kernel tests: two network namespaces joined by two TUN devices and a
// small forwarder written here (a test harness, not the product forwarder).
// They need root, /dev/net/tun and iproute2, and skip without them.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"golang.org/x/sys/unix"
)

func TestConstantsMatchKernelHeaders(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"NEEDS_CSUM", int(FlagNeedsCsum), unix.VIRTIO_NET_HDR_F_NEEDS_CSUM},
		{"DATA_VALID", int(FlagDataValid), unix.VIRTIO_NET_HDR_F_DATA_VALID},
		{"GSO_NONE", int(GSONone), unix.VIRTIO_NET_HDR_GSO_NONE},
		{"GSO_TCPV4", int(GSOTCPv4), unix.VIRTIO_NET_HDR_GSO_TCPV4},
		{"GSO_UDP", int(GSOUDP), unix.VIRTIO_NET_HDR_GSO_UDP},
		{"GSO_TCPV6", int(GSOTCPv6), unix.VIRTIO_NET_HDR_GSO_TCPV6},
		{"GSO_UDP_L4", int(GSOUDPL4), unix.VIRTIO_NET_HDR_GSO_UDP_L4},
		{"GSO_ECN", int(GSOECN), unix.VIRTIO_NET_HDR_GSO_ECN},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, kernel header says %d", c.name, c.got, c.want)
		}
	}
}

func requireNetAdmin(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testsupport.Unavailable(tb, "needs root (CI runs as root)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testsupport.Unavailable(tb, "no /dev/net/tun: %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testsupport.Unavailable(tb, "iproute2 (ip) not installed")
	}
}

// netns is a named network namespace created for one test.
type netns struct {
	name string
	fd   int
}

func newNetns(tb testing.TB, name string) *netns {
	tb.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return &netns{name: name, fd: fd}
}

// do runs fn on a fresh OS thread switched into ns. The thread is returned
// to the scheduler only if it could be switched back; otherwise it exits
// with its goroutine.
func (ns *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func (ns *netns) ip(tb testing.TB, args ...string) {
	tb.Helper()
	full := append([]string{"-n", ns.name}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(full, " "), err, out)
	}
}

// tunOffloads is what the forwarder asks for; USO is dropped on EINVAL.
const (
	tunOffloadTCP = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN
	tunOffloadUSO = unix.TUN_F_USO4 | unix.TUN_F_USO6
)

// openTUN creates TUN device name in ns; with vnet it enables IFF_VNET_HDR
// and offloads and returns the offload flags the kernel accepted.
func openTUN(tb testing.TB, ns *netns, name string, vnet bool) (*os.File, int) {
	tb.Helper()
	var fd, offl int
	err := ns.do(func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if vnet {
			flags |= unix.IFF_VNET_HDR
		}
		ifr.SetUint16(flags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("TUNSETIFF: %w", err)
		}
		if !vnet {
			return nil
		}
		offl = tunOffloadTCP | tunOffloadUSO
		err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offl)
		if errors.Is(err, unix.EINVAL) {
			offl = tunOffloadTCP
			err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offl)
		}
		if err != nil {
			return fmt.Errorf("TUNSETOFFLOAD %#x: %w", offl, err)
		}
		return nil
	})
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		tb.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), name) // non-blocking: served by the netpoller
	return f, offl
}

type fwdMode int

const (
	modePlain    fwdMode = iota // no vnet header: one packet per read and write
	modeSegment                 // offloads on read, every wire packet written alone
	modeCoalesce                // offloads on read, Coalesce before writing
)

func (m fwdMode) String() string {
	return [...]string{"plain", "segment-only", "segment+coalesce"}[m]
}

// impair decides per wire packet of one direction: drop every dropEvery-th
// and corrupt (flip a payload bit of) every corruptEvery-th data packet.
type impair struct {
	dropEvery, corruptEvery int
}

// fwdStats are written by one forwarder goroutine and read after it ends.
type fwdStats struct {
	reads, gsoReads, usoReads int
	wire, dataPkts            int
	dropped, corrupted        int
	writes, superWrites       int
	segErrs, writeErrs        int
	lastSegErr, lastWriteErr  error
	readErr                   error
	cpu                       time.Duration // CPU time of the forwarder thread
}

func (s *fwdStats) String() string {
	return fmt.Sprintf("reads %d (GSO %d, USO %d), wire packets %d, writes %d (super-packets %d), dropped %d, corrupted %d, segment errors %d (%v), write errors %d (%v)",
		s.reads, s.gsoReads, s.usoReads, s.wire, s.writes, s.superWrites, s.dropped, s.corrupted, s.segErrs, s.lastSegErr, s.writeErrs, s.lastWriteErr)
}

func isClosed(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EBADF)
}

// forward moves packets from src to dst until src is closed, on a locked
// OS thread whose CPU time it records.
func forward(src, dst *os.File, mode fwdMode, imp impair, st *fwdStats) {
	defer lockThread()()
	if t0, ok := threadCPU(); ok {
		defer func() {
			if t1, ok := threadCPU(); ok {
				st.cpu = t1 - t0
			}
		}()
	}
	buf := make([]byte, VirtioNetHdrLen+65535)
	// read reads the next packet into buf; false ends the loop (the error,
	// unless the device was closed, is kept in st.readErr).
	read := func() (int, bool) {
		n, err := src.Read(buf)
		if err != nil && !isClosed(err) {
			st.readErr = err
		}
		return n, err == nil
	}
	if mode == modePlain {
		for {
			n, ok := read()
			if !ok {
				return
			}
			st.reads++
			st.wire++
			if _, err := dst.Write(buf[:n]); err != nil {
				if isClosed(err) {
					return
				}
				st.writeErrs++
				st.lastWriteErr = err
			}
			st.writes++
		}
	}
	segs, sizes := bufs(256, 2048), make([]int, 256)
	arena, out := make([]byte, 256*(VirtioNetHdrLen+2048)), make([][]byte, 256)
	wire := make([][]byte, 0, 256)
	single := make([]byte, VirtioNetHdrLen+2048)
	var c Coalescer
	for {
		n, ok := read()
		if !ok {
			return
		}
		var h VirtioNetHdr
		if err := h.Decode(buf[:n]); err != nil {
			st.segErrs++
			st.lastSegErr = err
			continue
		}
		k, err := Segment(h, buf[VirtioNetHdrLen:n], segs, sizes)
		if err != nil {
			st.segErrs++
			st.lastSegErr = err
			continue
		}
		st.reads++
		if h.GSOType != GSONone {
			st.gsoReads++
		}
		if h.GSOType == GSOUDPL4 {
			st.usoReads++
		}
		wire = wire[:0]
		for i := range k {
			p := segs[i][:sizes[i]]
			st.wire++
			if len(p) > 200 {
				st.dataPkts++
				if imp.dropEvery > 0 && st.dataPkts%imp.dropEvery == 0 {
					st.dropped++
					continue
				}
				if imp.corruptEvery > 0 && st.dataPkts%imp.corruptEvery == 0 {
					p[len(p)-1] ^= 0x01
					st.corrupted++
				}
			}
			wire = append(wire, p)
		}
		writeOne := func(b []byte) bool {
			if _, err := dst.Write(b); err != nil {
				if isClosed(err) {
					return false
				}
				st.writeErrs++
				st.lastWriteErr = err
			}
			st.writes++
			return true
		}
		if mode == modeSegment {
			for _, p := range wire {
				clear(single[:VirtioNetHdrLen])
				m := copy(single[VirtioNetHdrLen:], p)
				if !writeOne(single[:VirtioNetHdrLen+m]) {
					return
				}
			}
			continue
		}
		j, err := c.Coalesce(wire, arena, out)
		if err != nil {
			st.writeErrs++
			st.lastWriteErr = err
			continue
		}
		for i := range j {
			if out[i][1] != GSONone {
				st.superWrites++
			}
			if !writeOne(out[i]) {
				return
			}
		}
	}
}

// testbed is a client and a server namespace joined by the forwarder.
type testbed struct {
	client, server  *netns
	clientIP, srvIP string
	up, down        fwdStats // client->server, server->client
	offloads        int
	stop            func()
}

func newTestbed(tb testing.TB, mode fwdMode, v6 bool, upImpair impair) *testbed {
	tb.Helper()
	requireNetAdmin(tb)
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	id := hex.EncodeToString(rb[:])
	t := &testbed{
		client: newNetns(tb, "qboff"+id+"c"),
		server: newNetns(tb, "qboff"+id+"s"),
	}
	vnet := mode != modePlain
	cdev, sdev := "qboff"+id[:4]+"c", "qboff"+id[:4]+"s"
	cf, offl := openTUN(tb, t.client, cdev, vnet)
	sf, _ := openTUN(tb, t.server, sdev, vnet)
	t.offloads = offl
	if v6 {
		t.clientIP, t.srvIP = "fd00:b0ff:1::1", "fd00:b0ff:2::1"
		t.client.ip(tb, "-6", "addr", "add", t.clientIP+"/64", "dev", cdev, "nodad")
		t.server.ip(tb, "-6", "addr", "add", t.srvIP+"/64", "dev", sdev, "nodad")
	} else {
		t.clientIP, t.srvIP = "10.201.1.1", "10.201.2.1"
		t.client.ip(tb, "addr", "add", t.clientIP+"/24", "dev", cdev)
		t.server.ip(tb, "addr", "add", t.srvIP+"/24", "dev", sdev)
	}
	for _, x := range []struct {
		ns  *netns
		dev string
	}{{t.client, cdev}, {t.server, sdev}} {
		x.ns.ip(tb, "link", "set", "lo", "up")
		x.ns.ip(tb, "link", "set", x.dev, "up")
	}
	if v6 {
		t.client.ip(tb, "-6", "route", "add", "fd00:b0ff:2::/64", "dev", cdev)
		t.server.ip(tb, "-6", "route", "add", "fd00:b0ff:1::/64", "dev", sdev)
	} else {
		t.client.ip(tb, "route", "add", "10.201.2.0/24", "dev", cdev)
		t.server.ip(tb, "route", "add", "10.201.1.0/24", "dev", sdev)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); forward(cf, sf, mode, upImpair, &t.up) }()
	go func() { defer wg.Done(); forward(sf, cf, mode, impair{}, &t.down) }()
	var once sync.Once
	t.stop = func() {
		once.Do(func() {
			cf.Close()
			sf.Close()
			wg.Wait()
		})
	}
	tb.Cleanup(t.stop)
	return t
}

// dialTCP connects from the client namespace to a listener in the server
// namespace and returns both ends.
func (t *testbed) dialTCP(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	var ln net.Listener
	if err := t.server.do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(t.srvIP, "0"))
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	if err := t.client.do(func() (err error) {
		client, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// snmp returns a counter of /proc/net/snmp (e.g. "Tcp", "InCsumErrors") as
// seen from ns.
func (ns *netns) snmp(tb testing.TB, proto, name string) int {
	tb.Helper()
	var data []byte
	if err := ns.do(func() (err error) {
		data, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	var head []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != proto+":" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i := range head {
			if head[i] == name && i < len(f) {
				v, err := strconv.Atoi(f[i])
				if err != nil {
					tb.Fatal(err)
				}
				return v
			}
		}
	}
	tb.Fatalf("no %s %s in /proc/net/snmp", proto, name)
	return 0
}

// transfer sends size bytes of seeded random data from client to server and
// returns the SHA-256 of what was sent and what was received.
func transfer(tb testing.TB, client, server net.Conn, size int) (sent, got [32]byte, n int64) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)
	type result struct {
		sum [32]byte
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		h := sha256.New()
		n, err := io.Copy(h, server)
		var r result
		copy(r.sum[:], h.Sum(nil))
		r.n, r.err = n, err
		done <- r
	}()
	rng := mrand.NewChaCha8([32]byte{1, 2, 3})
	h := sha256.New()
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; {
		m := min(left, len(chunk))
		_, _ = rng.Read(chunk[:m])
		h.Write(chunk[:m])
		if _, err := client.Write(chunk[:m]); err != nil {
			tb.Fatalf("write: %v", err)
		}
		left -= m
	}
	if err := client.(*net.TCPConn).CloseWrite(); err != nil {
		tb.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		tb.Fatalf("read: %v after %d bytes", r.err, r.n)
	}
	copy(sent[:], h.Sum(nil))
	return sent, r.sum, r.n
}

// TestKernelTCPThroughOffload pushes a TCP transfer through TUN devices with
// TSO enabled, segmenting every super-packet into wire packets (dropping and
// corrupting some, as the emulator's impairments would) and coalescing them
// again before writing. It checks that the data arrives byte for byte, that
// the kernel really handed over and accepted super-packets, and that every
// corrupted wire packet was caught by the receiving kernel's TCP checksum.
func TestKernelTCPThroughOffload(t *testing.T) {
	forEachIPVersion(t, func(t *testing.T, v6 bool) {
		tb := newTestbed(t, modeCoalesce, v6, impair{dropEvery: 211, corruptEvery: 97})
		client, server := tb.dialTCP(t)
		csum0 := tb.server.snmp(t, "Tcp", "InCsumErrors")
		const size = 24 << 20
		sent, got, n := transfer(t, client, server, size)
		tb.stop()
		t.Logf("up: %v", &tb.up)
		t.Logf("down: %v", &tb.down)
		if n != size || sent != got {
			t.Fatalf("received %d bytes (want %d), digest match %v", n, size, sent == got)
		}
		for _, s := range []*fwdStats{&tb.up, &tb.down} {
			if s.segErrs != 0 || s.writeErrs != 0 || s.readErr != nil {
				t.Fatalf("forwarder errors: %v (read error %v)", s, s.readErr)
			}
		}
		if tb.up.gsoReads == 0 {
			t.Fatal("the kernel handed over no TSO super-packet: offloads not in effect")
		}
		if tb.up.superWrites == 0 {
			t.Fatal("no coalesced super-packet was written")
		}
		if tb.up.corrupted == 0 || tb.up.dropped == 0 {
			t.Fatalf("impairments not exercised: %v", &tb.up)
		}
		if csum := tb.server.snmp(t, "Tcp", "InCsumErrors") - csum0; csum != tb.up.corrupted {
			t.Fatalf("receiver counted %d TCP checksum errors, %d packets were corrupted", csum, tb.up.corrupted)
		}
	})
}

// forEachIPVersion runs f as a subtest over IPv4 and over IPv6.
func forEachIPVersion(t *testing.T, f func(t *testing.T, v6 bool)) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) { f(t, v6) })
	}
}

// TestKernelUDPGSOThroughOffload sends UDP with UDP_SEGMENT (as quic-go
// does) through TUN devices with USO enabled; the receiving socket has no
// UDP_GRO, so the kernel must segment the coalesced super-packets itself,
// using the pseudo-header checksum Coalesce wrote.
func TestKernelUDPGSOThroughOffload(t *testing.T) {
	forEachIPVersion(t, func(t *testing.T, v6 bool) {
		tb := newTestbed(t, modeCoalesce, v6, impair{})
		var srv, cli *net.UDPConn
		if err := tb.server.do(func() (err error) {
			srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(tb.srvIP)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if err := tb.client.do(func() (err error) {
			cli, err = net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		const seg, perSend, rounds = 1200, 10, 30
		raw, err := cli.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, seg)
		}); err != nil || serr != nil {
			t.Fatalf("UDP_SEGMENT: %v %v", err, serr)
		}
		srv.SetDeadline(time.Now().Add(30 * time.Second))
		msg := make([]byte, seg*perSend-500) // last datagram shorter
		rbuf := make([]byte, 65535)
		for r := range rounds {
			for i := range msg {
				msg[i] = byte(r*131 + i*7 + i>>8)
			}
			if _, err := cli.Write(msg); err != nil {
				t.Fatalf("round %d: send: %v", r, err)
			}
			for d := range perSend {
				n, err := srv.Read(rbuf)
				if err != nil {
					t.Fatalf("round %d datagram %d: %v", r, d, err)
				}
				want := msg[d*seg : min((d+1)*seg, len(msg))]
				if !bytes.Equal(rbuf[:n], want) {
					t.Fatalf("round %d datagram %d: %d bytes, not the %d sent", r, d, n, len(want))
				}
			}
		}
		tb.stop()
		t.Logf("up: %v (offloads %#x)", &tb.up, tb.offloads)
		if tb.up.segErrs != 0 || tb.up.writeErrs != 0 {
			t.Fatalf("forwarder errors: %v", &tb.up)
		}
		if tb.offloads&tunOffloadUSO == 0 {
			t.Logf("kernel refused USO; UDP GSO was segmented before the TUN")
			return
		}
		if tb.up.usoReads == 0 {
			t.Fatal("USO enabled but no UDP_L4 super-packet was read")
		}
		if tb.up.superWrites == 0 {
			t.Fatal("no coalesced UDP super-packet was written")
		}
	})
}

// BenchmarkKernelTCPThroughOffload measures bulk TCP goodput through the
// test forwarder in three modes, in the same run: plain (one packet per
// read and write, no vnet header), segment-only (TSO reads, one write per
// wire packet) and segment+coalesce (TSO reads, GRO-like writes).
func BenchmarkKernelTCPThroughOffload(b *testing.B) {
	for _, mode := range []fwdMode{modePlain, modeSegment, modeCoalesce} {
		b.Run(mode.String(), func(b *testing.B) {
			tb := newTestbed(b, mode, false, impair{})
			client, server := tb.dialTCP(b)
			recv := make(chan int64, 1)
			go func() {
				n, _ := io.Copy(io.Discard, server)
				recv <- n
			}()
			chunk := make([]byte, 1<<20)
			_, _ = rand.Read(chunk)
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			start := time.Now()
			var sent int64
			for b.Loop() {
				if _, err := client.Write(chunk); err != nil {
					b.Fatal(err)
				}
				sent += int64(len(chunk))
			}
			client.(*net.TCPConn).CloseWrite()
			if got := <-recv; got != sent {
				b.Fatalf("received %d of %d bytes", got, sent)
			}
			el := time.Since(start)
			tb.stop()
			gbps := float64(sent) * 8 / el.Seconds() / 1e9
			b.ReportMetric(gbps, "Gbit/s")
			b.ReportMetric(float64(tb.up.wire)/float64(max(tb.up.writes, 1)), "wire-pkts/write")
			b.ReportMetric(float64(tb.up.wire)/float64(max(tb.up.reads, 1)), "wire-pkts/read")
			// CPU the forwarder spends per GB, both directions: independent
			// of how much CPU other work on the machine leaves us.
			fwdCPU := (tb.up.cpu + tb.down.cpu).Seconds()
			b.ReportMetric(fwdCPU/(float64(sent)/1e9), "fwd-cpu-s/GB")
			b.Logf("%s: %.2f Gbit/s, forwarder CPU %.2f s/GB; up: %v", mode, gbps, fwdCPU/(float64(sent)/1e9), &tb.up)
			if tb.up.segErrs != 0 || tb.up.writeErrs != 0 {
				b.Fatalf("forwarder errors: %v", &tb.up)
			}
		})
	}
}

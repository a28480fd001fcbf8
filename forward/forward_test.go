package forward

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/tun"
	"golang.org/x/sys/unix"
)

// pair is a fake TUN device: the forwarder's end is a non-blocking
// SOCK_SEQPACKET socket (one packet per read, like TUN), the test's end a
// blocking one with a receive timeout.
type pair struct {
	dev  *tun.Device
	peer int
}

func newPair(t *testing.T, name string) pair {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	p := pair{dev: tun.FromFD(fds[0], name, false), peer: fds[1]}
	t.Cleanup(func() { p.dev.Close(); unix.Close(p.peer) })
	return p
}

// settled returns path i's counters once the forwarder has published them
// for everything it was given (it does when it goes idle), or the last
// snapshot after 5 s.
func (r *rig) settled(i int, done func(emu.Counters) bool) emu.Counters {
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := r.fwd.Counters(i)
		if done(c) || time.Now().After(deadline) {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}

// read reads one packet from fd, retrying interrupted reads.
func read(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// write writes one packet to fd, retrying interrupted writes.
func write(fd int, b []byte) error {
	for {
		_, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return err
		}
	}
}

// packet builds an IPv4/UDP-looking packet numbered i.
func packet(i int, size int) []byte {
	b := make([]byte, size)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(size))
	b[8] = 64
	b[9] = unix.IPPROTO_UDP
	copy(b[12:], []byte{10, 1, 1, 2, 10, 1, 2, 2})
	binary.BigEndian.PutUint32(b[28:], uint32(i))
	return b
}

type rig struct {
	fwd         *Forwarder
	in, out     pair // up: in -> out
	back, back2 pair // down: back -> back2 (unused by most tests)
	pool        *emu.Pool
}

func newRig(t *testing.T, link string) *rig {
	t.Helper()
	return startRig(t, link, false)
}

// startRig starts a forwarder whose up path goes through link; with vnet,
// the up path's devices read and write virtio_net_hdr super-packets.
func startRig(t *testing.T, link string, vnet bool) *rig {
	t.Helper()
	r := &rig{in: newPair(t, "in"), out: newPair(t, "out"), back: newPair(t, "back"), back2: newPair(t, "back2")}
	if vnet {
		r.in.dev = tun.FromFD(r.in.dev.Fd(), "in", true)
		r.out.dev = tun.FromFD(r.out.dev.Fd(), "out", true)
	}
	l, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	r.pool = emu.NewPool(4096, 2048)
	up, err := pipeline.New(l, 1, r.pool)
	if err != nil {
		t.Fatal(err)
	}
	downPool := emu.NewPool(64, 2048)
	down, _ := pipeline.New(spec.Link{}, 2, downPool)
	r.fwd, err = Start(emu.MonotonicClock(), Options{},
		Path{Name: "up", From: r.in.dev, To: r.out.dev, Link: up, Pool: r.pool, Router: netip.MustParseAddr("10.1.1.1")},
		Path{Name: "down", From: r.back.dev, To: r.back2.dev, Link: down, Pool: downPool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.fwd.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// send writes packets first..first+n-1 and reads back up to want of them.
func (r *rig) exchange(t *testing.T, first, n, want int) [][]byte {
	t.Helper()
	for i := first; i < first+n; i++ {
		if err := write(r.in.peer, packet(i, 1200)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	var got [][]byte
	buf := make([]byte, 4096)
	for len(got) < want {
		k, err := read(r.out.peer, buf)
		if err != nil {
			break
		}
		got = append(got, append([]byte(nil), buf[:k]...))
	}
	return got
}

func TestPassThroughKeepsPacketsAndOrder(t *testing.T) {
	r := newRig(t, "")
	for batch := 0; batch < 20; batch++ {
		got := r.exchange(t, batch*50, 50, 50)
		if len(got) != 50 {
			t.Fatalf("batch %d: %d packets out, want 50", batch, len(got))
		}
		for j, b := range got {
			if want := packet(batch*50+j, 1200); !bytes.Equal(b, want) {
				t.Fatalf("batch %d packet %d differs (number %d)", batch, j, binary.BigEndian.Uint32(b[28:]))
			}
		}
	}
	c := r.settled(0, func(c emu.Counters) bool { return c.PacketsOut >= 1000 })
	if c.PacketsIn != 1000 || c.PacketsOut != 1000 || c.BytesOut != 1200*1000 {
		t.Fatalf("counters %+v", c)
	}
	if s := r.fwd.Stats(0); s.ReadErrors+s.WriteErrors+s.PoolEmpty != 0 {
		t.Fatalf("stats %+v", s)
	}
	if d := r.fwd.Counters(1); d.PacketsIn != 0 {
		t.Fatalf("down direction saw %+v", d)
	}
}

func TestDelayHoldsPackets(t *testing.T) {
	r := newRig(t, "delay 50ms")
	start := time.Now()
	got := r.exchange(t, 0, 10, 10)
	if len(got) != 10 {
		t.Fatalf("%d packets out", len(got))
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("packets came out after %v, before the 50ms delay", el)
	}
}

func TestLossAllDropsAndCounts(t *testing.T) {
	r := newRig(t, "loss 100%")
	unix.SetsockoptTimeval(r.out.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000})
	if got := r.exchange(t, 0, 100, 1); len(got) != 0 {
		t.Fatalf("%d packets crossed a 100%% loss link", len(got))
	}
	c := r.settled(0, func(c emu.Counters) bool { return c.PacketsIn >= 100 })
	if c.PacketsIn != 100 || c.DropLoss != 100 || c.PacketsOut != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestSetLinkSwitchesPipelineAndPool(t *testing.T) {
	r := newRig(t, "loss 100%")
	unix.SetsockoptTimeval(r.out.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000})
	if got := r.exchange(t, 0, 10, 1); len(got) != 0 {
		t.Fatal("loss 100% let a packet through")
	}
	pool := emu.NewPool(128, 2048)
	p, _ := pipeline.New(spec.Link{}, 1, pool)
	if err := r.fwd.SetLink(0, p, pool); err != nil {
		t.Fatal(err)
	}
	if got := r.exchange(t, 10, 10, 10); len(got) != 10 {
		t.Fatalf("after SetLink %d packets out, want 10", len(got))
	}
	if c := r.settled(0, func(c emu.Counters) bool { return c.PacketsOut >= 10 }); c.PacketsOut != 10 || c.DropLoss != 0 {
		t.Fatalf("counters of the new pipeline %+v", c)
	}
	if pool.Available() != pool.Cap() {
		t.Fatalf("new pool: %d of %d packets back", pool.Available(), pool.Cap())
	}
	if err := r.fwd.SetLink(5, p, nil); err == nil {
		t.Fatal("SetLink of a missing path succeeded")
	}
}

func TestCloseStopsAndRestoresGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	r := newRig(t, "delay 1s")
	if got := runtime.GOMAXPROCS(0); got < 4 || got < before+2 {
		t.Fatalf("GOMAXPROCS %d with two forwarder threads (was %d)", got, before)
	}
	r.exchange(t, 0, 5, 0) // queued for a second
	if err := r.fwd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.fwd.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Close, want %d", got, before)
	}
	if r.pool.Available() != r.pool.Cap() {
		t.Fatalf("queued packets not returned: %d of %d", r.pool.Available(), r.pool.Cap())
	}
	pool := emu.NewPool(8, 2048)
	p, _ := pipeline.New(spec.Link{}, 1, pool)
	if err := r.fwd.SetLink(0, p, pool); err == nil {
		t.Fatal("SetLink after Close succeeded")
	}
}

func TestStartRejectsIncompletePath(t *testing.T) {
	in := newPair(t, "in")
	if _, err := Start(emu.MonotonicClock(), Options{}, Path{Name: "up", From: in.dev}); err == nil {
		t.Fatal("Start with no output device, link or pool succeeded")
	}
}

// The hot path must not allocate: forward many packets and count the
// process's allocations (the test side uses raw syscalls on preallocated
// buffers).
func TestNoAllocationPerPacket(t *testing.T) {
	r := newRig(t, "delay 1us")
	const batches, per = 200, 50
	pkts := make([][]byte, per)
	for i := range pkts {
		pkts[i] = packet(i, 1200)
	}
	buf := make([]byte, 4096)
	run := func() {
		for b := 0; b < batches; b++ {
			for _, p := range pkts {
				write(r.in.peer, p)
			}
			for range pkts {
				if _, err := read(r.out.peer, buf); err != nil {
					t.Errorf("read: %v", err)
					return
				}
			}
		}
	}
	run() // warm up
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	run()
	runtime.ReadMemStats(&m1)
	c := r.settled(0, func(c emu.Counters) bool { return c.PacketsIn >= 2*batches*per })
	if c.PacketsIn < 2*batches*per {
		t.Fatalf("only %d packets entered", c.PacketsIn)
	}
	allocs := m1.Mallocs - m0.Mallocs
	if perPacket := float64(allocs) / (batches * per); perPacket > 0.01 {
		t.Fatalf("%d allocations for %d packets (%.3f per packet)", allocs, batches*per, perPacket)
	}
}

package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/tun"
	"golang.org/x/sys/unix"
)

// end is one side of a fake TUN device: the forwarder reads and writes
// fd's other end as a device (SOCK_SEQPACKET keeps packets whole).
type end struct {
	dev  *tun.Device
	peer int
}

func newEnd(t *testing.T, name string) end {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	e := end{dev: tun.FromFD(fds[0], name, false), peer: fds[1]}
	t.Cleanup(func() { e.dev.Close(); unix.Close(e.peer) })
	return e
}

// bench is a forwarder with a tap between two pairs of fake devices:
// client -> server through up, server -> client through down.
type bench struct {
	fwd                 *forward.Forwarder
	client, server      end // the client's and server's device ends (up: client.peer -> server.peer)
	clientIn, serverOut end
}

func newBench(t *testing.T, up, down string, snap int) *bench {
	t.Helper()
	b := &bench{client: newEnd(t, "c"), server: newEnd(t, "s"), clientIn: newEnd(t, "ci"), serverOut: newEnd(t, "so")}
	links := make([]*pipeline.Pipeline, 2)
	pools := []*emu.Pool{emu.NewPool(4096, 2048), emu.NewPool(4096, 2048)}
	for i, s := range []string{up, down} {
		l, err := spec.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if links[i], err = pipeline.New(l, uint64(i+1), pools[i]); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	b.fwd, err = forward.Start(emu.MonotonicClock(), forward.Options{Tap: &forward.TapOptions{Snap: snap}},
		forward.Path{Name: "up", From: b.client.dev, To: b.server.dev, Link: links[0], Pool: pools[0]},
		forward.Path{Name: "down", From: b.serverOut.dev, To: b.clientIn.dev, Link: links[1], Pool: pools[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.fwd.Close() })
	return b
}

// udp builds an IPv4 UDP packet of size bytes, numbered i, client to
// server (up) or back.
func udp(i, size int, up bool) []byte {
	b := make([]byte, size)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(size))
	b[8], b[9] = 64, 17
	src, dst := []byte{10, 7, 1, 2}, []byte{10, 7, 2, 2}
	sp, dp := uint16(50000), uint16(4433)
	if !up {
		src, dst, sp, dp = dst, src, dp, sp
	}
	copy(b[12:], src)
	copy(b[16:], dst)
	binary.BigEndian.PutUint16(b[20:], sp)
	binary.BigEndian.PutUint16(b[22:], dp)
	binary.BigEndian.PutUint16(b[24:], uint16(size-20))
	b[28] = 0x41 // a QUIC short header
	binary.BigEndian.PutUint32(b[32:], uint32(i))
	return b
}

// exchange sends n packets each way and reads what arrives.
func (b *bench) exchange(t *testing.T, first, n int) (gotUp, gotDown int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if err := unix.Send(b.client.peer, udp(i, 1000, true), 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.Send(b.serverOut.peer, udp(i, 1200, false), 0); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 4096)
	for _, p := range []struct {
		fd  int
		got *int
	}{{b.server.peer, &gotUp}, {b.clientIn.peer, &gotDown}} {
		for {
			if _, _, err := unix.Recvfrom(p.fd, buf, 0); err != nil {
				break
			}
			*p.got++
		}
	}
	return gotUp, gotDown
}

// TestSessionSegmentsMatchCounters: a segment between Begin and End holds
// exactly the packets of that interval, with the verdicts the links'
// counters count, and packets before and after are not in it.
func TestSessionSegmentsMatchCounters(t *testing.T) {
	b := newBench(t, "delay 5ms loss 10% duplicate 5%", "delay 5ms 2ms loss 5% reorder 5%", 0)
	s, err := Start(b.fwd, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b.exchange(t, 0, 30) // before: not in the segment
	up0, down0, err := s.Begin(4433)
	if err != nil {
		t.Fatal(err)
	}
	gotUp, gotDown := b.exchange(t, 1000, 300)
	g, up1, down1, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	b.exchange(t, 5000, 30) // after
	for d, c := range []emu.Counters{up1.Sub(up0), down1.Sub(down0)} {
		if c.PacketsIn != 300 || c.DropLoss == 0 {
			t.Fatalf("direction %d: counters %+v", d, c)
		}
		v := g.Verdicts[d]
		if v[pipeline.Delivered] != c.PacketsOut || v[pipeline.DroppedLoss] != c.DropLoss || g.Marks[d][1] != c.Reordered || g.Marks[d][0] != c.Duplicated {
			t.Errorf("direction %d: verdicts %v marks %v, counters %+v", d, v, g.Marks[d], c)
		}
		if g.Recorded[d] != c.PacketsOut+c.DropLoss || g.Missed(d) != 0 {
			t.Errorf("direction %d: %d recorded, %d missed", d, g.Recorded[d], g.Missed(d))
		}
	}
	if uint64(gotUp) != up1.Sub(up0).PacketsOut || uint64(gotDown) != down1.Sub(down0).PacketsOut {
		t.Fatalf("read %d up, %d down; counters %d, %d", gotUp, gotDown, up1.Sub(up0).PacketsOut, down1.Sub(down0).PacketsOut)
	}
	// The fake flow's server packets may reach the client before its
	// first packet reaches the server (jitter): those are not the flow's.
	if w := g.Wire(); !w.Valid || w.Flows != 1 || w.DataPackets == 0 || w.DataPackets > down1.Sub(down0).PacketsOut {
		t.Fatalf("wire timing %+v", w)
	}

	// The pcapng file: both interfaces, the secrets, every packet with its
	// comment, in time order, and only the segment's packets.
	path := filepath.Join(t.TempDir(), "s.pcapng")
	keys := []byte("CLIENT_HANDSHAKE_TRAFFIC_SECRET 00 11\n")
	if err := g.WriteFile(path, g.Info("sample 1", 128, "test"), keys); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var n [2]uint64
	var drops [2]uint64
	var last time.Time
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n[ci.InterfaceIndex]++
		if len(opts.Comments) != 1 {
			t.Fatalf("packet %d: comments %q", n, opts.Comments)
		}
		if strings.HasPrefix(opts.Comments[0], "dropped by loss") {
			drops[ci.InterfaceIndex]++
		}
		if i := binary.BigEndian.Uint32(data[32:]); i < 1000 || i >= 1300 {
			t.Fatalf("packet %d of another interval in the segment", i)
		}
		if ci.Timestamp.Before(last.Add(-10 * time.Millisecond)) {
			t.Fatalf("packet at %v after one at %v", ci.Timestamp, last)
		}
		last = ci.Timestamp
	}
	if n != g.Recorded || drops[0] != up1.Sub(up0).DropLoss || drops[1] != down1.Sub(down0).DropLoss {
		t.Fatalf("file: %v packets (%v lost); segment %v", n, drops, g.Recorded)
	}
	if r.NInterfaces() != 2 {
		t.Fatalf("%d interfaces", r.NInterfaces())
	}
	if got := tsharkField(t, path, "", "frame.comment", "-Y", `frame.comment contains "dropped by loss"`); len(got) != int(drops[0]+drops[1]) {
		t.Fatalf("tshark: %d lost packets, want %d", len(got), drops[0]+drops[1])
	}

	// A second segment starts afresh.
	if _, _, err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	b.exchange(t, 9000, 5)
	g2, _, _, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	g2.Remove()
	if g2.Verdicts[0][pipeline.Delivered]+g2.Verdicts[0][pipeline.DroppedLoss] < 5 {
		t.Fatalf("second segment %v", g2.Verdicts)
	}
}

// TestSessionBudget: once the run's capture budget is spent, packets are
// counted as missed instead of written, and the segment says so.
func TestSessionBudget(t *testing.T) {
	b := newBench(t, "", "", 0)
	budget := NewBudget(20 * 1024)
	s, err := Start(b.fwd, Options{Dir: t.TempDir(), Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Begin()
	b.exchange(t, 0, 200)
	g, up, down, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	if !budget.Exhausted() || g.Over[0]+g.Over[1] == 0 || g.Bytes > 20*1024 {
		t.Fatalf("budget %d left, over %v, %d bytes written", budget.Left(), g.Over, g.Bytes)
	}
	if g.Recorded[0]+g.Over[0] != up.PacketsOut || g.Recorded[1]+g.Over[1] != down.PacketsOut {
		t.Fatalf("recorded %v + over %v != delivered %d, %d", g.Recorded, g.Over, up.PacketsOut, down.PacketsOut)
	}
}

// TestSessionNeedsATap: a forwarder without a tap cannot be captured.
func TestSessionNeedsATap(t *testing.T) {
	c, s := newEnd(t, "c"), newEnd(t, "s")
	pool := emu.NewPool(64, 2048)
	p, _ := pipeline.New(spec.Link{}, 1, pool)
	fwd, err := forward.Start(emu.MonotonicClock(), forward.Options{}, forward.Path{Name: "up", From: c.dev, To: s.dev, Link: p, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	if _, err := Start(fwd, Options{Dir: t.TempDir()}); err == nil {
		t.Fatal("Start on a forwarder without a tap succeeded")
	}
}

// tsharkField runs tshark on a capture with extra arguments and returns
// the values of field, one per packet (-T fields). keylog, when not
// empty, is given as tls.keylog_file.
func tsharkField(t *testing.T, path, keylog, field string, args ...string) []string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		testsupport.Unavailable(t, "tshark is not installed (bash scripts/setup.sh installs it)")
	}
	a := []string{"-n", "-r", path, "-T", "fields", "-e", field}
	if keylog != "" {
		a = append(a, "-o", "tls.keylog_file:"+keylog)
	}
	cmd := exec.Command(bin, append(a, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user preferences
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("tshark: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("tshark: %v", err)
	}
	var vals []string
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if l != "" {
			vals = append(vals, l)
		}
	}
	return vals
}

// TestKeyLogsTake: each Take hands out the complete lines appended since
// the last, once each, from files that may appear late.
func TestKeyLogsTake(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "server.keys"), filepath.Join(dir, "client.keys")
	os.WriteFile(a, []byte("OLD 1 2\n"), 0o600)
	k := FollowKeyLogs(a, b)
	appendTo := func(name, s string) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	appendTo(a, "CLIENT_TRAFFIC_SECRET_0 aa bb\nSERVER_TRAFFIC_SECRET_0 aa cc\nPART")
	appendTo(b, "CLIENT_TRAFFIC_SECRET_0 aa bb\n")
	got, err := k.Take()
	if err != nil || string(got) != "CLIENT_TRAFFIC_SECRET_0 aa bb\nSERVER_TRAFFIC_SECRET_0 aa cc\n" {
		t.Fatalf("first Take %q, %v", got, err)
	}
	appendTo(a, "IAL 1 2\n")
	if got, _ := k.Take(); string(got) != "PARTIAL 1 2\n" {
		t.Fatalf("second Take %q", got)
	}
	if got, _ := k.Take(); len(got) != 0 {
		t.Fatalf("third Take %q", got)
	}
	for i := 0; i < 3; i++ {
		appendTo(b, "L"+strconv.Itoa(i)+" x y\n")
	}
	if got, _ := k.Take(); strings.Count(string(got), "\n") != 3 {
		t.Fatalf("fourth Take %q", got)
	}
}

// TestSessionCountOnly: a session that only counts writes no packets but
// counts the verdicts and times the flows.
func TestSessionCountOnly(t *testing.T) {
	b := newBench(t, "delay 2ms loss 10%", "delay 2ms", 0)
	s, err := Start(b.fwd, Options{Dir: t.TempDir(), CountOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up0, _, _ := s.Begin()
	b.exchange(t, 0, 100)
	g, up1, _, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	c := up1.Sub(up0)
	if g.Verdicts[0][pipeline.DroppedLoss] != c.DropLoss || g.Verdicts[0][pipeline.Delivered] != c.PacketsOut || c.DropLoss == 0 {
		t.Fatalf("verdicts %v, counters %+v", g.Verdicts[0], c)
	}
	if g.Bytes != 0 || g.Recorded != [2]uint64{} || !g.Wire().Valid {
		t.Fatalf("count only: %d bytes, %v recorded, wire %+v", g.Bytes, g.Recorded, g.Wire())
	}
	if st, err := os.Stat(g.Path()); err != nil || st.Size() != 0 {
		t.Fatalf("segment file: %v %v", st, err)
	}
}

package sockdiag

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"golang.org/x/sys/unix"
)

func TestRequestLayout(t *testing.T) {
	local := netip.MustParseAddrPort("10.1.2.2:443")
	remote := netip.MustParseAddrPort("10.1.1.2:40000")
	b := request(unix.AF_INET, Connected, local, remote)
	if len(b) != 56 {
		t.Fatalf("inet_diag_req_v2 is %d bytes, want 56", len(b))
	}
	if b[0] != unix.AF_INET || b[1] != unix.IPPROTO_TCP {
		t.Errorf("family/protocol = %d/%d", b[0], b[1])
	}
	if b[2] != 1<<1|1<<3 {
		t.Errorf("idiag_ext = %#x, want INFO and CONG (%#x)", b[2], 1<<1|1<<3)
	}
	if got := States(binary.NativeEndian.Uint32(b[4:])); got != Connected {
		t.Errorf("states = %#x", got)
	}
	// Ports are big-endian in inet_diag_sockid, addresses in network order.
	if b[8] != 443>>8 || b[9] != 443&0xff || binary.BigEndian.Uint16(b[10:]) != 40000 {
		t.Errorf("ports = % x", b[8:12])
	}
	if !slices.Equal(b[12:16], []byte{10, 1, 2, 2}) || !slices.Equal(b[28:32], []byte{10, 1, 1, 2}) {
		t.Errorf("addresses = % x / % x", b[12:28], b[28:44])
	}
	if binary.NativeEndian.Uint32(b[48:]) != noCookie || binary.NativeEndian.Uint32(b[52:]) != noCookie {
		t.Errorf("cookie = % x, want INET_DIAG_NOCOOKIE", b[48:56])
	}
	// A dump leaves the socket id empty.
	d := request(unix.AF_INET6, AllStates, netip.AddrPort{}, netip.AddrPort{})
	if d[0] != unix.AF_INET6 || !slices.Equal(d[8:48], make([]byte, 40)) {
		t.Errorf("dump request id = % x", d[8:48])
	}
}

// nlmsg frames body as one netlink message of type typ and sequence seq.
func nlmsg(typ uint16, seq uint32, body []byte) []byte {
	b := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body)+3)
	b = append(b, body...)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint32(b[8:], seq)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func attr(typ uint16, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// diagMsg builds an inet_diag_msg for an IPv4 socket.
func diagMsg(state State, local, remote netip.AddrPort, uid, inode uint32, attrs ...[]byte) []byte {
	b := make([]byte, 72)
	b[0], b[1] = unix.AF_INET, byte(state)
	binary.BigEndian.PutUint16(b[4:], local.Port())
	binary.BigEndian.PutUint16(b[6:], remote.Port())
	l, r := local.Addr().As4(), remote.Addr().As4()
	copy(b[8:], l[:])
	copy(b[24:], r[:])
	binary.NativeEndian.PutUint32(b[64:], uid)
	binary.NativeEndian.PutUint32(b[68:], inode)
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

func TestParse(t *testing.T) {
	local := netip.MustParseAddrPort("10.7.2.2:8443")
	remote := netip.MustParseAddrPort("10.7.1.2:51000")
	info := make([]byte, 300) // longer than unix.TCPInfo: a newer kernel's
	info[0] = byte(Established)
	binary.NativeEndian.PutUint32(info[8:], 123456) // tcpi_rto, after 8 bytes of u8 fields
	var reply []byte
	reply = append(reply, nlmsg(sockDiagByFamily, 9, diagMsg(Established, local, remote, 1000, 77,
		attr(inetDiagCong, []byte("cubic\x00")), attr(inetDiagInfo, info), attr(99, []byte{1, 2, 3})))...)
	reply = append(reply, nlmsg(sockDiagByFamily, 8, diagMsg(Listen, local, remote, 0, 1))...) // another request's
	reply = append(reply, nlmsg(sockDiagByFamily, 9, diagMsg(TimeWait, remote, local, 0, 0))...)
	socks, done, err := parse(reply, 9, false)
	if err != nil || done {
		t.Fatalf("parse: done %v, err %v", done, err)
	}
	if len(socks) != 2 {
		t.Fatalf("parsed %d sockets, want 2: %+v", len(socks), socks)
	}
	s := socks[0]
	if s.Local != local || s.Remote != remote || s.State != Established || s.UID != 1000 || s.Inode != 77 || s.CC != "cubic" {
		t.Errorf("socket = %+v", s)
	}
	if s.Info == nil || s.Info.Rto != 123456 || s.Info.State != uint8(Established) {
		t.Errorf("tcp_info = %+v", s.Info)
	}
	if w := socks[1]; w.CC != "" || w.Info != nil || w.State != TimeWait || w.Local != remote {
		t.Errorf("time-wait socket = %+v", w)
	}
	if _, done, err := parse(nlmsg(unix.NLMSG_DONE, 9, make([]byte, 4)), 9, false); !done || err != nil {
		t.Errorf("NLMSG_DONE: done %v, err %v", done, err)
	}
	e := make([]byte, 20)
	enoent := -int32(unix.ENOENT)
	binary.NativeEndian.PutUint32(e, uint32(enoent))
	if _, done, err := parse(nlmsg(unix.NLMSG_ERROR, 9, e), 9, true); !done || !errors.Is(err, unix.ENOENT) {
		t.Errorf("NLMSG_ERROR: done %v, err %v", done, err)
	}
	// A lookup's reply is one socket, without NLMSG_DONE.
	if socks, done, err := parse(nlmsg(sockDiagByFamily, 9, diagMsg(Established, local, remote, 0, 5)), 9, true); !done || err != nil || len(socks) != 1 {
		t.Errorf("single: %d sockets, done %v, err %v", len(socks), done, err)
	}
}

func TestParseMalformed(t *testing.T) {
	good := nlmsg(sockDiagByFamily, 1, diagMsg(Established, netip.MustParseAddrPort("1.2.3.4:1"), netip.MustParseAddrPort("5.6.7.8:2"), 0, 0))
	for name, b := range map[string][]byte{
		"short header":    good[:10],
		"length too long": append(binary.NativeEndian.AppendUint32(nil, 4096), good[4:]...),
		"short message":   nlmsg(sockDiagByFamily, 1, make([]byte, 20)),
		"bad attribute":   nlmsg(sockDiagByFamily, 1, append(diagMsg(Established, netip.MustParseAddrPort("1.2.3.4:1"), netip.MustParseAddrPort("5.6.7.8:2"), 0, 0), 200, 0, 4, 0)),
		"bad family":      nlmsg(sockDiagByFamily, 1, append([]byte{77}, make([]byte, 71)...)),
	} {
		if _, done, err := parse(b, 1, false); err == nil || !done {
			t.Errorf("%s: done %v, err %v; want an error", name, done, err)
		}
	}
}

// TestLoopback asks the kernel about a real connection of this process:
// the client's socket selects reno (allowed to every user), the accepted
// one keeps the namespace's default.
func TestLoopback(t *testing.T) {
	def, err := readDefault()
	if err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "reno") })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cl, sv := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
	s, err := Lookup(cl, sv)
	if err != nil {
		t.Fatal(err)
	}
	if s.CC != "reno" || s.State != Established || s.Info == nil || s.Info.Snd_mss == 0 || s.Inode == 0 {
		t.Errorf("client socket = %+v (info %+v), want reno, established, with tcp_info", s, s.Info)
	}
	s, err = Lookup(sv, cl)
	if err != nil {
		t.Fatal(err)
	}
	if s.CC != def {
		t.Errorf("accepted socket runs %q, want the namespace default %q", s.CC, def)
	}
	all, err := Dump(AnyFamily, Connected)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range all {
		if s.Local == cl && s.Remote == sv || s.Local == sv && s.Remote == cl {
			found++
		}
		if s.State == Listen || s.State == TimeWait {
			t.Errorf("dump of connected states returned %v socket %+v", s.State, s)
		}
	}
	if found != 2 {
		t.Errorf("dump found %d of the connection's 2 sockets", found)
	}
	// The listener is found with its own state.
	lst, err := Dump(IPv4, 1<<Listen)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lst, func(s Socket) bool { return s.Local == ln.Addr().(*net.TCPAddr).AddrPort() && s.State == Listen }) {
		t.Errorf("listener %s not in the dump of listening sockets", ln.Addr())
	}
	if _, err := Lookup(cl, netip.MustParseAddrPort("127.0.0.1:1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup of a missing socket: %v, want ErrNotFound", err)
	}
	if _, err := Lookup(cl, netip.MustParseAddrPort("[::1]:1")); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("lookup across families: %v, want a usage error", err)
	}
}

func readDefault() (string, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	return strings.TrimSpace(string(b)), err
}

// Package sockdiag asks the kernel's socket diagnostics (NETLINK_SOCK_DIAG,
// inet_diag) about TCP sockets: their addresses, state, owner, congestion
// control (INET_DIAG_CONG) and tcp_info (INET_DIAG_INFO). It sees every
// socket of a network namespace, including those of programs quicbench
// does not control (a third-party server, a browser), which is how
// quicbench learns the congestion control their connections really ran.
//
// A netlink socket belongs to the network namespace of the thread that
// opens it, so run Dump and Lookup, or Open, on a thread inside the
// namespace to inspect (netns.Testbed.Do); a Conn then answers for that
// namespace from anywhere. Reading congestion control and tcp_info of
// other users' sockets needs no privilege beyond being in the namespace.
// Linux only.
package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// State is a TCP socket state as the kernel numbers it (include/net/tcp_states.h).
type State uint8

// TCP states.
const (
	Established State = 1
	SynSent     State = 2
	SynRecv     State = 3
	FinWait1    State = 4
	FinWait2    State = 5
	TimeWait    State = 6
	Close       State = 7
	CloseWait   State = 8
	LastAck     State = 9
	Listen      State = 10
	Closing     State = 11
)

var stateNames = [...]string{"", "ESTABLISHED", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT",
	"CLOSE", "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING"}

func (s State) String() string {
	if int(s) > 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// States is a set of states: bit 1<<s for state s.
type States uint32

// AllStates selects sockets in any state.
const AllStates States = 0xffffffff

// Connected selects the states of a connection that carries or may still
// carry data, and whose socket therefore has a congestion control: every
// state but listening, TIME-WAIT (a minimal socket without one) and closed.
const Connected = States(1<<Established | 1<<SynSent | 1<<SynRecv | 1<<FinWait1 | 1<<FinWait2 |
	1<<CloseWait | 1<<LastAck | 1<<Closing)

// Socket is one TCP socket as the kernel's socket diagnostics describe it.
type Socket struct {
	Local, Remote netip.AddrPort
	State         State
	UID           uint32
	Inode         uint32 // 0 for a socket no file refers to (TIME-WAIT, orphaned)
	// CC is the congestion control algorithm of the socket
	// (INET_DIAG_CONG): "" when the kernel did not report one (TIME-WAIT
	// and request sockets have none).
	CC string
	// Info is the socket's tcp_info (INET_DIAG_INFO) as getsockopt(TCP_INFO)
	// gives it, nil when not reported; fields the running kernel does not
	// have are zero.
	Info *unix.TCPInfo
}

// Netlink and inet_diag constants (linux/inet_diag.h, linux/sock_diag.h).
const (
	sockDiagByFamily = unix.SOCK_DIAG_BY_FAMILY
	inetDiagInfo     = 2 // INET_DIAG_INFO
	inetDiagCong     = 4 // INET_DIAG_CONG
	sizeofSockID     = 48
	sizeofReqV2      = 8 + sizeofSockID
	sizeofDiagMsg    = 4 + sizeofSockID + 20
	noCookie         = 0xffffffff // INET_DIAG_NOCOOKIE
)

// ErrNotFound is returned by Lookup when no socket has the 4-tuple asked for.
var ErrNotFound = errors.New("no such TCP socket")

// Family selects the address families Dump returns.
type Family uint8

// Families for Dump.
const (
	IPv4 Family = 1 << iota
	IPv6
	AnyFamily = IPv4 | IPv6
)

// Conn is a sock_diag netlink socket. It belongs to the network namespace
// of the thread that opened it, and answers for that namespace from any
// goroutine (one request at a time), so a caller that asks repeatedly
// enters the namespace once.
type Conn struct {
	fd  int
	seq uint32
	buf []byte
}

// Open opens a sock_diag socket in the calling thread's network namespace.
func Open() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("netlink sock_diag socket: %w", err)
	}
	return &Conn{fd: fd, buf: make([]byte, 1<<16)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// Dump returns the TCP sockets of the calling thread's network namespace in
// one of states and of the families asked for, each with its congestion
// control and tcp_info. Every dump walks the kernel's TCP hash tables,
// which all namespaces share (about 0.2 ms per family on a machine with a
// few GB of memory, however few sockets the namespace has): ask for one
// family where that is enough.
func Dump(families Family, states States) ([]Socket, error) {
	c, err := Open()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Dump(families, states)
}

// Dump returns the TCP sockets of c's namespace (see the function Dump).
func (c *Conn) Dump(families Family, states States) ([]Socket, error) {
	var out []Socket
	for _, f := range []struct {
		bit    Family
		family uint8
	}{{IPv4, unix.AF_INET}, {IPv6, unix.AF_INET6}} {
		if families&f.bit == 0 {
			continue
		}
		socks, err := c.do(request(f.family, states, netip.AddrPort{}, netip.AddrPort{}), unix.NLM_F_DUMP)
		if err != nil {
			if f.family == unix.AF_INET6 && errors.Is(err, unix.EAFNOSUPPORT) {
				continue // a kernel without IPv6
			}
			return nil, fmt.Errorf("sock_diag dump of %s TCP sockets: %w", familyName(f.family), err)
		}
		out = append(out, socks...)
	}
	return out, nil
}

// Lookup returns the TCP socket of the calling thread's network namespace
// whose local and remote addresses are local and remote (both IPv4 or both
// IPv6), or an error wrapping ErrNotFound. A connection between two
// namespaces has one socket in each: look it up in each with the
// addresses swapped. Unlike a dump, a lookup costs the same however large
// the kernel's hash tables are.
func Lookup(local, remote netip.AddrPort) (Socket, error) {
	c, err := Open()
	if err != nil {
		return Socket{}, err
	}
	defer c.Close()
	return c.Lookup(local, remote)
}

// Lookup finds one TCP socket of c's namespace (see the function Lookup).
func (c *Conn) Lookup(local, remote netip.AddrPort) (Socket, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if !local.IsValid() || !remote.IsValid() || local.Addr().Is4() != remote.Addr().Is4() {
		return Socket{}, fmt.Errorf("sock_diag lookup %s -> %s: want two addresses of one family", local, remote)
	}
	family := uint8(unix.AF_INET)
	if local.Addr().Is6() {
		family = unix.AF_INET6
	}
	socks, err := c.do(request(family, AllStates, local, remote), 0)
	if errors.Is(err, unix.ENOENT) || err == nil && len(socks) == 0 {
		return Socket{}, fmt.Errorf("TCP socket %s -> %s: %w", local, remote, ErrNotFound)
	}
	if err != nil {
		return Socket{}, fmt.Errorf("sock_diag lookup %s -> %s: %w", local, remote, err)
	}
	return socks[0], nil
}

func familyName(f uint8) string {
	if f == unix.AF_INET6 {
		return "IPv6"
	}
	return "IPv4"
}

// request builds an inet_diag_req_v2 for TCP sockets of family in states,
// asking for tcp_info and the congestion control; local and remote, when
// valid, name one socket (an exact lookup, not a dump).
func request(family uint8, states States, local, remote netip.AddrPort) []byte {
	b := make([]byte, sizeofReqV2)
	b[0] = family
	b[1] = unix.IPPROTO_TCP
	b[2] = 1<<(inetDiagInfo-1) | 1<<(inetDiagCong-1)
	binary.NativeEndian.PutUint32(b[4:], uint32(states))
	id := b[8:]
	if local.IsValid() {
		binary.BigEndian.PutUint16(id[0:], local.Port())
		binary.BigEndian.PutUint16(id[2:], remote.Port())
		putAddr(id[4:20], local.Addr())
		putAddr(id[20:36], remote.Addr())
	}
	binary.NativeEndian.PutUint32(id[40:], noCookie)
	binary.NativeEndian.PutUint32(id[44:], noCookie)
	return b
}

func putAddr(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// do sends one SOCK_DIAG_BY_FAMILY request with body req and extra netlink
// flags, and returns the sockets of the reply.
func (c *Conn) do(req []byte, flags uint16) ([]Socket, error) {
	c.seq++
	seq := c.seq
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(req))
	msg = append(msg, req...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []Socket
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		socks, done, err := parse(c.buf[:n], seq, flags&unix.NLM_F_DUMP == 0)
		out = append(out, socks...)
		if err != nil || done {
			return out, err
		}
	}
}

// parse decodes one datagram of a sock_diag reply to request seq. done
// reports the end of the reply: NLMSG_DONE, an error, or (single, for a
// lookup, which has no NLMSG_DONE) the first socket.
func parse(b []byte, seq uint32, single bool) (socks []Socket, done bool, err error) {
	for len(b) > 0 {
		if len(b) < unix.SizeofNlMsghdr {
			return socks, true, fmt.Errorf("netlink: truncated message header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		mseq := binary.NativeEndian.Uint32(b[8:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return socks, true, fmt.Errorf("netlink: malformed message length %d (%d bytes left)", l, len(b))
		}
		data := b[unix.SizeofNlMsghdr:l]
		b = b[min(align(l), len(b)):]
		if mseq != seq {
			continue
		}
		switch typ {
		case unix.NLMSG_DONE:
			return socks, true, nil
		case unix.NLMSG_ERROR:
			if len(data) < 4 {
				return socks, true, errors.New("netlink: short error message")
			}
			if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
				return socks, true, unix.Errno(-code)
			}
			return socks, true, nil
		case sockDiagByFamily:
			s, err := parseSocket(data)
			if err != nil {
				return socks, true, err
			}
			socks = append(socks, s)
			if single {
				return socks, true, nil
			}
		}
	}
	return socks, false, nil
}

func align(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// parseSocket decodes an inet_diag_msg and its attributes.
func parseSocket(b []byte) (Socket, error) {
	if len(b) < sizeofDiagMsg {
		return Socket{}, fmt.Errorf("sock_diag: short inet_diag_msg (%d bytes, want %d)", len(b), sizeofDiagMsg)
	}
	family, id := b[0], b[4:4+sizeofSockID]
	addr := func(p []byte) (netip.Addr, error) {
		switch family {
		case unix.AF_INET:
			return netip.AddrFrom4([4]byte(p[:4])), nil
		case unix.AF_INET6:
			return netip.AddrFrom16([16]byte(p[:16])), nil
		}
		return netip.Addr{}, fmt.Errorf("sock_diag: unknown address family %d", family)
	}
	src, err := addr(id[4:20])
	if err != nil {
		return Socket{}, err
	}
	dst, _ := addr(id[20:36])
	rest := b[4+sizeofSockID:]
	s := Socket{
		Local:  netip.AddrPortFrom(src, binary.BigEndian.Uint16(id[0:])),
		Remote: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(id[2:])),
		State:  State(b[1]),
		UID:    binary.NativeEndian.Uint32(rest[12:]),
		Inode:  binary.NativeEndian.Uint32(rest[16:]),
	}
	for a := b[align(sizeofDiagMsg):]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a[0:]))
		typ := binary.NativeEndian.Uint16(a[2:])
		if l < unix.SizeofRtAttr || l > len(a) {
			return Socket{}, fmt.Errorf("sock_diag: malformed attribute length %d (%d bytes left)", l, len(a))
		}
		payload := a[unix.SizeofRtAttr:l]
		switch typ {
		case inetDiagCong:
			s.CC = cString(payload)
		case inetDiagInfo:
			s.Info = tcpInfo(payload)
		}
		a = a[min(align(l), len(a)):]
	}
	return s, nil
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

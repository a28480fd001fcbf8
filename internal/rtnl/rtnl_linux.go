// Package rtnl is a minimal route-netlink client: what quicbench's testbed
// (netns) and calibrate's veth reference need to create veth pairs, bring
// links up, add addresses and routes, and send traffic-control requests
// they build themselves with Msg.
package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn is a route-netlink socket. It is bound to the network namespace of
// the thread that opened it, and may then be used from any goroutine (one
// at a time).
type Conn struct {
	fd  int
	seq atomic.Uint32
}

// Open opens a route-netlink socket in the calling thread's network
// namespace.
func Open() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &Conn{fd: fd}, nil
}

// Close closes the socket.
func (r *Conn) Close() { unix.Close(r.fd) }

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// Msg builds the body of a netlink request (after the netlink header):
// a fixed header written with Raw, then attributes.
type Msg struct{ b []byte }

// Bytes is the body built so far.
func (m *Msg) Bytes() []byte { return m.b }

// Raw appends the n bytes at p (a kernel struct such as unix.IfInfomsg),
// padded to the netlink alignment.
func (m *Msg) Raw(p unsafe.Pointer, n int) {
	m.b = append(m.b, unsafe.Slice((*byte)(p), n)...)
	for len(m.b)%unix.NLMSG_ALIGNTO != 0 {
		m.b = append(m.b, 0)
	}
}

// Attr appends attribute typ with payload data.
func (m *Msg) Attr(typ uint16, data []byte) {
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(unix.SizeofRtAttr+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	m.b = append(m.b, h[:]...)
	m.b = append(m.b, data...)
	for len(m.b) != nlAlign(len(m.b)) {
		m.b = append(m.b, 0)
	}
}

// AttrU32 appends attribute typ with a native-endian 32-bit payload.
func (m *Msg) AttrU32(typ uint16, v uint32) {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	m.Attr(typ, b[:])
}

// AttrString appends attribute typ with s as a NUL-terminated payload.
func (m *Msg) AttrString(typ uint16, s string) { m.Attr(typ, append([]byte(s), 0)) }

// Nest starts nested attribute typ: the attributes appended until End with
// the returned offset are its payload.
func (m *Msg) Nest(typ uint16) int {
	off := len(m.b)
	m.Attr(typ, nil)
	return off
}

// End closes the nested attribute that Nest started at off.
func (m *Msg) End(off int) {
	binary.NativeEndian.PutUint16(m.b[off:], uint16(len(m.b)-off))
}

// Do sends one request of message type typ with flags (NLM_F_REQUEST and
// NLM_F_ACK are added) and body, and waits for its acknowledgement.
func (r *Conn) Do(typ uint16, flags uint16, body []byte) error {
	seq := r.seq.Add(1)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= unix.SizeofNlMsghdr; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return fmt.Errorf("netlink: malformed reply")
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			mseq := binary.NativeEndian.Uint32(b[8:])
			data := b[unix.SizeofNlMsghdr:l]
			if mseq == seq && typ == unix.NLMSG_ERROR {
				if len(data) < 4 {
					return fmt.Errorf("netlink: short error message")
				}
				if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
					return unix.Errno(-code)
				}
				return nil
			}
			if nlAlign(l) >= len(b) {
				break
			}
			b = b[nlAlign(l):]
		}
	}
}

// linkSet brings interface index up and sets its MTU and transmit queue
// length (0 leaves them unchanged).
func (r *Conn) linkSet(index int, mtu, txqlen uint32) error {
	var m Msg
	info := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	m.Raw(unsafe.Pointer(&info), unix.SizeofIfInfomsg)
	if mtu != 0 {
		m.AttrU32(unix.IFLA_MTU, mtu)
	}
	if txqlen != 0 {
		m.AttrU32(unix.IFLA_TXQLEN, txqlen)
	}
	if err := r.Do(unix.RTM_NEWLINK, 0, m.b); err != nil {
		return fmt.Errorf("set link %d up: %w", index, err)
	}
	return nil
}

// addrAdd adds an IPv4 address with its prefix length to interface index.
func (r *Conn) addrAdd(index int, p netip.Prefix) error {
	var m Msg
	a := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(p.Bits()), Index: uint32(index)}
	m.Raw(unsafe.Pointer(&a), unix.SizeofIfAddrmsg)
	ip := p.Addr().As4()
	m.Attr(unix.IFA_LOCAL, ip[:])
	m.Attr(unix.IFA_ADDRESS, ip[:])
	if err := r.Do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("add address %s: %w", p, err)
	}
	return nil
}

// routeAdd adds a link-scope IPv4 route to dst through interface index.
func (r *Conn) routeAdd(dst netip.Prefix, index int) error {
	var m Msg
	rt := unix.RtMsg{
		Family: unix.AF_INET, Dst_len: uint8(dst.Bits()), Table: unix.RT_TABLE_MAIN,
		Protocol: unix.RTPROT_BOOT, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
	}
	m.Raw(unsafe.Pointer(&rt), unix.SizeofRtMsg)
	ip := dst.Masked().Addr().As4()
	m.Attr(unix.RTA_DST, ip[:])
	m.AttrU32(unix.RTA_OIF, uint32(index))
	if err := r.Do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("add route %s: %w", dst, err)
	}
	return nil
}

// RouteCC replaces the link-scope IPv4 route to dst through interface
// name (in the calling thread's namespace) with one that carries the
// congestion control metric cc (RTAX_CC_ALGO, `ip route ... congctl cc`):
// every TCP connection whose route it is then uses cc, whatever its
// socket or the namespace's default asked for (the kernel applies the
// route's algorithm when a connection is set up, after TCP_CONGESTION).
// An empty cc removes the metric. It needs no host-wide setting: unlike
// net.ipv4.tcp_congestion_control in a namespace, a route may name any
// algorithm the kernel has.
func RouteCC(dst netip.Prefix, name, cc string) error {
	nl, err := Open()
	if err != nil {
		return err
	}
	defer nl.Close()
	idx, err := IfIndex(name)
	if err != nil {
		return err
	}
	var m Msg
	rt := unix.RtMsg{
		Family: unix.AF_INET, Dst_len: uint8(dst.Bits()), Table: unix.RT_TABLE_MAIN,
		Protocol: unix.RTPROT_BOOT, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
	}
	m.Raw(unsafe.Pointer(&rt), unix.SizeofRtMsg)
	ip := dst.Masked().Addr().As4()
	m.Attr(unix.RTA_DST, ip[:])
	m.AttrU32(unix.RTA_OIF, uint32(idx))
	if cc != "" {
		mx := m.Nest(unix.RTA_METRICS)
		m.AttrString(unix.RTAX_CC_ALGO, cc)
		m.End(mx)
	}
	if err := nl.Do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, m.b); err != nil {
		return fmt.Errorf("route %s congestion control %q: %w", dst, cc, err)
	}
	return nil
}

// vethInfoPeer is VETH_INFO_PEER (linux/veth.h), the peer's nested ifinfomsg.
const vethInfoPeer = 1

// AddVeth creates the veth pair name <-> peer, with peer in the namespace
// peerNS (a file descriptor).
func (r *Conn) AddVeth(name, peer string, peerNS int) error {
	var m Msg
	info := unix.IfInfomsg{Family: unix.AF_UNSPEC}
	m.Raw(unsafe.Pointer(&info), unix.SizeofIfInfomsg)
	m.AttrString(unix.IFLA_IFNAME, name)
	li := m.Nest(unix.IFLA_LINKINFO)
	m.AttrString(unix.IFLA_INFO_KIND, "veth")
	data := m.Nest(unix.IFLA_INFO_DATA)
	p := m.Nest(vethInfoPeer)
	pinfo := unix.IfInfomsg{Family: unix.AF_UNSPEC}
	m.Raw(unsafe.Pointer(&pinfo), unix.SizeofIfInfomsg)
	m.AttrString(unix.IFLA_IFNAME, peer)
	m.AttrU32(unix.IFLA_NET_NS_FD, uint32(peerNS))
	m.End(p)
	m.End(data)
	m.End(li)
	if err := r.Do(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", name, peer, err)
	}
	return nil
}

// Configure brings up the loopback device and interface name (with MTU mtu
// and transmit queue length txqlen; 0 leaves them unchanged) in the calling
// thread's network namespace, adds the IPv4 address addr to name, and adds
// a link-scope route through name to each of routes.
func Configure(name string, mtu, txqlen uint32, addr netip.Prefix, routes ...netip.Prefix) error {
	nl, err := Open()
	if err != nil {
		return err
	}
	defer nl.Close()
	if err := nl.linkSet(1, 0, 0); err != nil { // lo
		return err
	}
	idx, err := IfIndex(name)
	if err != nil {
		return err
	}
	if err := nl.linkSet(idx, mtu, txqlen); err != nil {
		return err
	}
	if err := nl.addrAdd(idx, addr); err != nil {
		return err
	}
	for _, r := range routes {
		if err := nl.routeAdd(r, idx); err != nil {
			return err
		}
	}
	return nil
}

// IfIndex returns the index of interface name in the calling thread's
// network namespace.
func IfIndex(name string) (int, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("interface %s: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}

// AddAddrs adds the IPv4 addresses to interface name in the calling
// thread's network namespace, each with its prefix length (an address
// already there is left as it is). A /32 adds no route: the addresses of
// a subnet the interface already routes are reachable with their
// interface's route.
func AddAddrs(name string, addrs ...netip.Prefix) error {
	nl, err := Open()
	if err != nil {
		return err
	}
	defer nl.Close()
	idx, err := IfIndex(name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if !a.Addr().Is4() {
			return fmt.Errorf("add address %s: IPv4 only", a)
		}
		if err := nl.addrAdd(idx, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

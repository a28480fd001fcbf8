package netns

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rtnl is a minimal route-netlink client: just what a testbed needs to bring
// links up and add addresses and routes. It is bound to the network
// namespace of the thread that opened it, and may then be used from any
// goroutine (one at a time).
type rtnl struct {
	fd  int
	seq atomic.Uint32
}

func openRtnl() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &rtnl{fd: fd}, nil
}

func (r *rtnl) close() { unix.Close(r.fd) }

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

type nlMsg struct{ b []byte }

func (m *nlMsg) raw(p unsafe.Pointer, n int) {
	m.b = append(m.b, unsafe.Slice((*byte)(p), n)...)
	for len(m.b)%unix.NLMSG_ALIGNTO != 0 {
		m.b = append(m.b, 0)
	}
}

func (m *nlMsg) attr(typ uint16, data []byte) {
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(unix.SizeofRtAttr+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	m.b = append(m.b, h[:]...)
	m.b = append(m.b, data...)
	for len(m.b) != nlAlign(len(m.b)) {
		m.b = append(m.b, 0)
	}
}

func (m *nlMsg) attrU32(typ uint16, v uint32) {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	m.attr(typ, b[:])
}

// do sends one request and waits for its acknowledgement.
func (r *rtnl) do(typ uint16, flags uint16, body []byte) error {
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
func (r *rtnl) linkSet(index int, mtu, txqlen uint32) error {
	var m nlMsg
	info := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	m.raw(unsafe.Pointer(&info), unix.SizeofIfInfomsg)
	if mtu != 0 {
		m.attrU32(unix.IFLA_MTU, mtu)
	}
	if txqlen != 0 {
		m.attrU32(unix.IFLA_TXQLEN, txqlen)
	}
	if err := r.do(unix.RTM_NEWLINK, 0, m.b); err != nil {
		return fmt.Errorf("set link %d up: %w", index, err)
	}
	return nil
}

// addrAdd adds an IPv4 address with its prefix length to interface index.
func (r *rtnl) addrAdd(index int, p netip.Prefix) error {
	var m nlMsg
	a := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(p.Bits()), Index: uint32(index)}
	m.raw(unsafe.Pointer(&a), unix.SizeofIfAddrmsg)
	ip := p.Addr().As4()
	m.attr(unix.IFA_LOCAL, ip[:])
	m.attr(unix.IFA_ADDRESS, ip[:])
	if err := r.do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("add address %s: %w", p, err)
	}
	return nil
}

// routeAdd adds a link-scope IPv4 route to dst through interface index.
func (r *rtnl) routeAdd(dst netip.Prefix, index int) error {
	var m nlMsg
	rt := unix.RtMsg{
		Family: unix.AF_INET, Dst_len: uint8(dst.Bits()), Table: unix.RT_TABLE_MAIN,
		Protocol: unix.RTPROT_BOOT, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
	}
	m.raw(unsafe.Pointer(&rt), unix.SizeofRtMsg)
	ip := dst.Masked().Addr().As4()
	m.attr(unix.RTA_DST, ip[:])
	m.attrU32(unix.RTA_OIF, uint32(index))
	if err := r.do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("add route %s: %w", dst, err)
	}
	return nil
}

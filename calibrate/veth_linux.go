package calibrate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/netns"
)

// vethPair is the reference path of calibrate: two anonymous network
// namespaces (held only by this process's file descriptors, so nothing
// outlives it) joined by a plain veth pair, configured like the testbed's
// namespaces (socket buffer limits, no IPv6) but with no emulator. Its
// one-way delay is the measurement's error floor; its goodput the
// denominator of the emulator's cost.
type vethPair struct {
	id   string
	ns   [2]*os.File // client, server
	mu   sync.Mutex
	done bool
}

// vethAddrs are the addresses of the two ends. The namespaces are private,
// so they cannot collide with anything.
var vethAddrs = [2]netip.Prefix{
	netip.MustParsePrefix("10.253.0.1/24"),
	netip.MustParsePrefix("10.253.0.2/24"),
}

// newVethPair builds the pair; sysctls (key -> value, e.g. net.ipv4.tcp_rmem)
// are written in both namespaces. On error nothing is left.
func newVethPair(sysctls map[string]string) (*vethPair, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	v := &vethPair{id: "qbcal" + hex.EncodeToString(b)}
	for i := range v.ns {
		f, err := newNetNS()
		if err != nil {
			v.Close()
			return nil, err
		}
		v.ns[i] = f
	}
	// The pair is created in the client namespace with its peer placed
	// directly in the server namespace: it never exists in the host's.
	names := [2]string{v.ifName(netns.Client), v.ifName(netns.Server)}
	err := v.Do(netns.Client, func() error {
		nl, err := openRtnl()
		if err != nil {
			return err
		}
		defer nl.close()
		return nl.addVeth(names[0], names[1], int(v.ns[netns.Server].Fd()))
	})
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("veth pair %s: %w", v.id, err)
	}
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		err := v.Do(s, func() error {
			for k, val := range sysctls {
				if err := writeSysctl(k, val); err != nil {
					return err
				}
			}
			for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
				if err := writeSysctl(k, "1"); err != nil {
					return err
				}
			}
			nl, err := openRtnl()
			if err != nil {
				return err
			}
			defer nl.close()
			if err := nl.linkUp(1); err != nil { // lo
				return err
			}
			idx, err := ifIndex(names[s])
			if err != nil {
				return err
			}
			if err := nl.linkUp(idx); err != nil {
				return err
			}
			return nl.addrAdd(idx, vethAddrs[s])
		})
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("veth pair %s, %s side: %w", v.id, s, err)
		}
	}
	return v, nil
}

// ifName is the name of side s's end of the pair.
func (v *vethPair) ifName(s netns.Side) string {
	if s == netns.Server {
		return v.id + "s"
	}
	return v.id + "c"
}

// Addr is the address of side s.
func (v *vethPair) Addr(s netns.Side) netip.Addr { return vethAddrs[s].Addr() }

// Do runs fn on a locked OS thread inside side s's namespace.
func (v *vethPair) Do(s netns.Side, fn func() error) error {
	v.mu.Lock()
	if v.done || v.ns[s] == nil {
		v.mu.Unlock()
		return errors.New("veth pair is closed")
	}
	fd := int(v.ns[s].Fd())
	v.mu.Unlock()
	return inNetNS(fd, fn)
}

// Command returns a command that runs name with arg inside side s's
// namespace, entered as the testbed's are (netns.CommandAt, through
// /proc/PID/fd of this process's namespace file): it gets SIGKILL when
// this process dies. The caller reaps it before Close: a process left in a
// namespace keeps it (and its veth pair) alive.
func (v *vethPair) Command(ctx context.Context, s netns.Side, name string, arg ...string) *exec.Cmd {
	v.mu.Lock()
	defer v.mu.Unlock()
	path := ""
	if !v.done && v.ns[s] != nil {
		path = "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(v.ns[s].Fd()))
	}
	cmd := netns.CommandAt(ctx, path, name, arg...)
	if path == "" && cmd.Err == nil {
		cmd.Err = errors.New("veth pair is closed")
	}
	return cmd
}

// Close releases the namespaces; the kernel then removes the veth pair and
// every socket left in them. It is idempotent.
func (v *vethPair) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done {
		return nil
	}
	v.done = true
	var errs []error
	for _, f := range v.ns {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// The process's own network namespace, to return to.
var hostNS struct {
	once sync.Once
	fd   int
	err  error
}

func hostNetNS() (int, error) {
	hostNS.once.Do(func() {
		hostNS.fd, hostNS.err = unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if hostNS.err != nil {
			hostNS.err = fmt.Errorf("open /proc/self/ns/net: %w", hostNS.err)
		}
	})
	return hostNS.fd, hostNS.err
}

// onLockedThread runs fn on a fresh goroutine locked to its OS thread. When
// fn reports the thread dirty (it could not return to the host namespace),
// the thread is not unlocked, so the runtime discards it.
func onLockedThread(fn func() (clean bool, err error)) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		clean, err := fn()
		if clean {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

func inNetNS(fd int, fn func() error) error {
	host, err := hostNetNS()
	if err != nil {
		return err
	}
	return onLockedThread(func() (bool, error) {
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("setns: %w", err)
		}
		ferr := fn()
		if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
			return false, errors.Join(ferr, fmt.Errorf("returning to the host namespace: %w", err))
		}
		return true, ferr
	})
}

func newNetNS() (*os.File, error) {
	host, err := hostNetNS()
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = onLockedThread(func() (bool, error) {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		fd, oerr := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if oerr == nil {
			f = os.NewFile(uintptr(fd), "netns")
		}
		if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
			return false, errors.Join(oerr, fmt.Errorf("returning to the host namespace: %w", err))
		}
		return true, oerr
	})
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return f, err
}

// writeSysctl writes key in the calling thread's network namespace.
func writeSysctl(key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("sysctl %s: %w", key, err)
	}
	return nil
}

func ifIndex(name string) (int, error) {
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

// rtnl is a minimal route-netlink client bound to the namespace of the
// thread that opened it.
type rtnl struct {
	fd  int
	seq uint32
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

// nlBuf builds a netlink message body; nest/end write nested attributes.
type nlBuf struct{ b []byte }

func (m *nlBuf) pad() {
	for len(m.b)%unix.NLMSG_ALIGNTO != 0 {
		m.b = append(m.b, 0)
	}
}

func (m *nlBuf) raw(p unsafe.Pointer, n int) {
	m.b = append(m.b, unsafe.Slice((*byte)(p), n)...)
	m.pad()
}

func (m *nlBuf) attr(typ uint16, data []byte) {
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(unix.SizeofRtAttr+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	m.b = append(m.b, h[:]...)
	m.b = append(m.b, data...)
	m.pad()
}

func (m *nlBuf) attrU32(typ uint16, v uint32) {
	m.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

func (m *nlBuf) attrString(typ uint16, s string) { m.attr(typ, append([]byte(s), 0)) }

// nest starts a nested attribute and returns its offset for end.
func (m *nlBuf) nest(typ uint16) int {
	off := len(m.b)
	m.attr(typ, nil)
	return off
}

func (m *nlBuf) end(off int) {
	binary.NativeEndian.PutUint16(m.b[off:], uint16(len(m.b)-off))
}

func (r *rtnl) do(typ, flags uint16, body []byte) error {
	r.seq++
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], r.seq)
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
				return errors.New("netlink: malformed reply")
			}
			if binary.NativeEndian.Uint32(b[8:]) == r.seq && binary.NativeEndian.Uint16(b[4:]) == unix.NLMSG_ERROR {
				data := b[unix.SizeofNlMsghdr:l]
				if len(data) < 4 {
					return errors.New("netlink: short error message")
				}
				if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
					return unix.Errno(-code)
				}
				return nil
			}
			al := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
			if al >= len(b) {
				break
			}
			b = b[al:]
		}
	}
}

// vethInfoPeer is VETH_INFO_PEER (linux/veth.h), the peer's nested ifinfomsg.
const vethInfoPeer = 1

// addVeth creates the veth pair name <-> peer, with peer in the namespace
// peerNS (a file descriptor).
func (r *rtnl) addVeth(name, peer string, peerNS int) error {
	var m nlBuf
	info := unix.IfInfomsg{Family: unix.AF_UNSPEC}
	m.raw(unsafe.Pointer(&info), unix.SizeofIfInfomsg)
	m.attrString(unix.IFLA_IFNAME, name)
	li := m.nest(unix.IFLA_LINKINFO)
	m.attrString(unix.IFLA_INFO_KIND, "veth")
	data := m.nest(unix.IFLA_INFO_DATA)
	p := m.nest(vethInfoPeer)
	pinfo := unix.IfInfomsg{Family: unix.AF_UNSPEC}
	m.raw(unsafe.Pointer(&pinfo), unix.SizeofIfInfomsg)
	m.attrString(unix.IFLA_IFNAME, peer)
	m.attrU32(unix.IFLA_NET_NS_FD, uint32(peerNS))
	m.end(p)
	m.end(data)
	m.end(li)
	if err := r.do(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.b); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", name, peer, err)
	}
	return nil
}

func (r *rtnl) linkUp(index int) error {
	var m nlBuf
	info := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	m.raw(unsafe.Pointer(&info), unix.SizeofIfInfomsg)
	if err := r.do(unix.RTM_NEWLINK, 0, m.b); err != nil {
		return fmt.Errorf("set link %d up: %w", index, err)
	}
	return nil
}

func (r *rtnl) addrAdd(index int, p netip.Prefix) error {
	var m nlBuf
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

// Traffic-control constants of linux/pkt_sched.h and linux/rtnetlink.h
// that golang.org/x/sys/unix does not define.
const (
	tcaOptions       = 2          // TCA_OPTIONS
	tcaTBFParms      = 1          // TCA_TBF_PARMS
	tcaTBFRate64     = 4          // TCA_TBF_RATE64
	tcaTBFBurst      = 6          // TCA_TBF_BURST
	tcHRoot          = 0xFFFFFFFF // TC_H_ROOT
	tcLinkLayerEther = 1          // TC_LINKLAYER_ETHERNET
)

// tcMsg is struct tcmsg.
type tcMsg struct {
	Family  uint8
	_       [3]byte
	Ifindex int32
	Handle  uint32
	Parent  uint32
	Info    uint32
}

// tcRateSpec is struct tc_ratespec.
type tcRateSpec struct {
	CellLog   uint8
	LinkLayer uint8
	Overhead  uint16
	CellAlign int16
	MPU       uint16
	Rate      uint32
}

// tcTBFQopt is struct tc_tbf_qopt.
type tcTBFQopt struct {
	Rate, PeakRate     tcRateSpec
	Limit, Buffer, MTU uint32
}

// tbfFrame is the largest frame on the veth pair (MTU 1500 plus the
// Ethernet header).
const tbfFrame = 1514

// tbfBurst is the token bucket's size: two frames, so that packets leave
// one by one at the rate, as they do through the emulator's rate stage,
// and a TSO super-packet is cut into its segments by the qdisc. With a
// bucket of one frame, every late timer of the qdisc's watchdog loses
// tokens: TCP then got 83 Mbit/s through 100 Mbit/s; with two, 95.6 (the
// emulator's rate stage: 96.5, counting IP bytes where tbf counts frames).
const tbfBurst = 2 * tbfFrame

// tbfLimit is the shaper's queue, in bytes: the emulator's default queue
// of 1000 packets (netem's limit) of full frames.
const tbfLimit = 1000 * tbfFrame

// setTBF makes a token bucket filter at bytesPerSec the root qdisc of
// interface index (replacing any), or removes the root qdisc when
// bytesPerSec is 0.
func (r *rtnl) setTBF(index int, bytesPerSec uint64) error {
	var m nlBuf
	msg := tcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(index), Parent: tcHRoot}
	if bytesPerSec == 0 {
		m.raw(unsafe.Pointer(&msg), int(unsafe.Sizeof(msg)))
		if err := r.do(unix.RTM_DELQDISC, 0, m.b); err != nil {
			return fmt.Errorf("remove the root qdisc of interface %d: %w", index, err)
		}
		return nil
	}
	msg.Handle = 1 << 16 // 1:
	m.raw(unsafe.Pointer(&msg), int(unsafe.Sizeof(msg)))
	m.attrString(unix.TCA_KIND, "tbf")
	opts := m.nest(tcaOptions)
	q := tcTBFQopt{Rate: tcRateSpec{LinkLayer: tcLinkLayerEther, Rate: uint32(min(bytesPerSec, 1<<32-1))}, Limit: tbfLimit}
	m.attr(tcaTBFParms, unsafe.Slice((*byte)(unsafe.Pointer(&q)), unsafe.Sizeof(q)))
	if bytesPerSec >= 1<<32-1 {
		m.attr(tcaTBFRate64, binary.NativeEndian.AppendUint64(nil, bytesPerSec))
	}
	m.attrU32(tcaTBFBurst, tbfBurst)
	m.end(opts)
	if err := r.do(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, m.b); err != nil {
		return fmt.Errorf("tbf at %d bytes/s on interface %d: %w", bytesPerSec, index, err)
	}
	return nil
}

// SetRate shapes both ends of the pair to bytesPerSec with the kernel's
// token bucket filter (tbf), or removes the shaping when bytesPerSec is 0:
// the kernel's own rate limiter, the baseline of what the emulator's rate
// stage costs.
func (v *vethPair) SetRate(bytesPerSec uint64) error {
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		err := v.Do(s, func() error {
			idx, err := ifIndex(v.ifName(s))
			if err != nil {
				return err
			}
			nl, err := openRtnl()
			if err != nil {
				return err
			}
			defer nl.close()
			return nl.setTBF(idx, bytesPerSec)
		})
		if err != nil {
			return fmt.Errorf("veth pair %s, %s side: %w", v.id, s, err)
		}
	}
	return nil
}

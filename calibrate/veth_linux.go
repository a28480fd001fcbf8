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
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/internal/rtnl"
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
		f, err := netns.NewNamespace()
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
		nl, err := rtnl.Open()
		if err != nil {
			return err
		}
		defer nl.Close()
		return nl.AddVeth(names[0], names[1], int(v.ns[netns.Server].Fd()))
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
			return rtnl.Configure(names[s], 0, 0, vethAddrs[s])
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
	return netns.InNamespace(fd, fn)
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

// writeSysctl writes key in the calling thread's network namespace.
func writeSysctl(key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("sysctl %s: %w", key, err)
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
func setTBF(r *rtnl.Conn, index int, bytesPerSec uint64) error {
	var m rtnl.Msg
	msg := tcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(index), Parent: tcHRoot}
	if bytesPerSec == 0 {
		m.Raw(unsafe.Pointer(&msg), int(unsafe.Sizeof(msg)))
		if err := r.Do(unix.RTM_DELQDISC, 0, m.Bytes()); err != nil {
			return fmt.Errorf("remove the root qdisc of interface %d: %w", index, err)
		}
		return nil
	}
	msg.Handle = 1 << 16 // 1:
	m.Raw(unsafe.Pointer(&msg), int(unsafe.Sizeof(msg)))
	m.AttrString(unix.TCA_KIND, "tbf")
	opts := m.Nest(tcaOptions)
	q := tcTBFQopt{Rate: tcRateSpec{LinkLayer: tcLinkLayerEther, Rate: uint32(min(bytesPerSec, 1<<32-1))}, Limit: tbfLimit}
	m.Attr(tcaTBFParms, unsafe.Slice((*byte)(unsafe.Pointer(&q)), unsafe.Sizeof(q)))
	if bytesPerSec >= 1<<32-1 {
		m.Attr(tcaTBFRate64, binary.NativeEndian.AppendUint64(nil, bytesPerSec))
	}
	m.AttrU32(tcaTBFBurst, tbfBurst)
	m.End(opts)
	if err := r.Do(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, m.Bytes()); err != nil {
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
			idx, err := rtnl.IfIndex(v.ifName(s))
			if err != nil {
				return err
			}
			nl, err := rtnl.Open()
			if err != nil {
				return err
			}
			defer nl.Close()
			return setTBF(nl, idx, bytesPerSec)
		})
		if err != nil {
			return fmt.Errorf("veth pair %s, %s side: %w", v.id, s, err)
		}
	}
	return nil
}

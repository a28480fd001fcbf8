package tun

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VnetHdrLen is the length of the virtio_net_hdr that precedes every packet
// on a device opened with Options.VnetHdr.
const VnetHdrLen = 10

// Offload flags for Options.Offloads (TUNSETOFFLOAD): the kinds of
// super-packets and checksum work the kernel may leave to the reader.
const (
	OffloadCsum = unix.TUN_F_CSUM    // partial checksums (required by all others)
	OffloadTSO4 = unix.TUN_F_TSO4    // TCP segmentation offload, IPv4
	OffloadTSO6 = unix.TUN_F_TSO6    // TCP segmentation offload, IPv6
	OffloadECN  = unix.TUN_F_TSO_ECN // TSO of segments carrying ECN CWR
	OffloadUSO4 = unix.TUN_F_USO4    // UDP segmentation offload, IPv4 (Linux >= 6.2)
	OffloadUSO6 = unix.TUN_F_USO6    // UDP segmentation offload, IPv6 (Linux >= 6.2)
)

// Options configure a TUN device.
type Options struct {
	// VnetHdr prefixes every packet with a virtio_net_hdr (IFF_VNET_HDR).
	VnetHdr bool
	// Offloads is a set of Offload* flags handed to TUNSETOFFLOAD; it
	// requires VnetHdr. Zero leaves offloads off.
	Offloads int
}

// ErrWouldBlock is returned by Read when no packet is waiting.
var ErrWouldBlock = unix.EAGAIN

// Device is an open TUN interface. Read and Write may be called from
// different goroutines; Close must not race with them (stop the users first).
type Device struct {
	fd      int
	name    string
	vnetHdr bool
	once    sync.Once
	err     error
}

// Create creates a TUN device named name (at most 15 bytes) in the network
// namespace of the calling OS thread (lock the thread and setns first to
// place it elsewhere). The device disappears when the Device is closed.
func Create(name string, opts Options) (*Device, error) {
	if len(name) == 0 || len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun: interface name %q must have 1 to %d bytes", name, unix.IFNAMSIZ-1)
	}
	if opts.Offloads != 0 && !opts.VnetHdr {
		return nil, errors.New("tun: offloads require VnetHdr")
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/dev/net/tun", Err: err}
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: %w", err)
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if opts.VnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: TUNSETIFF %s: %w", name, err)
	}
	d := &Device{fd: fd, name: ifr.Name(), vnetHdr: opts.VnetHdr}
	if opts.VnetHdr {
		sz := int32(VnetHdrLen)
		if err := ioctlPtr(fd, unix.TUNSETVNETHDRSZ, unsafe.Pointer(&sz)); err != nil {
			d.Close()
			return nil, fmt.Errorf("tun: TUNSETVNETHDRSZ: %w", err)
		}
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, opts.Offloads); err != nil {
			d.Close()
			return nil, fmt.Errorf("tun: TUNSETOFFLOAD %#x: %w", opts.Offloads, err)
		}
	}
	return d, nil
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// Name is the interface name.
func (d *Device) Name() string { return d.name }

// Fd is the non-blocking file descriptor, for poll(2). It stays owned by d.
func (d *Device) Fd() int { return d.fd }

// VnetHdr reports whether packets carry a virtio_net_hdr prefix.
func (d *Device) VnetHdr() bool { return d.vnetHdr }

// Read reads one packet into b and returns its length, or ErrWouldBlock
// when none is waiting. A packet longer than b is truncated by the kernel.
func (d *Device) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(d.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// Write injects one packet (an IP packet, preceded by a virtio_net_hdr on a
// VnetHdr device) into the kernel as if it had arrived on the interface.
func (d *Device) Write(b []byte) (int, error) {
	for {
		n, err := unix.Write(d.fd, b)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// Close closes the device; the kernel deletes the interface. It is
// idempotent.
func (d *Device) Close() error {
	d.once.Do(func() { d.err = unix.Close(d.fd) })
	return d.err
}

// FromFD wraps an open, non-blocking file descriptor that carries one packet
// per read and write, such as a TUN descriptor opened elsewhere or, in tests,
// one end of a SOCK_SEQPACKET socketpair. The Device owns fd from then on.
func FromFD(fd int, name string, vnetHdr bool) *Device {
	return &Device{fd: fd, name: name, vnetHdr: vnetHdr}
}

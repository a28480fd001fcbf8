package offload

import (
	"encoding/binary"
)

// VirtioNetHdrLen is the size in bytes of struct virtio_net_hdr, the header
// that precedes every packet read from or written to a TUN device opened with
// IFF_VNET_HDR (the kernel's default vnet_hdr_sz).
const VirtioNetHdrLen = 10

// Values of VirtioNetHdr.Flags (VIRTIO_NET_HDR_F_*).
const (
	// FlagNeedsCsum (VIRTIO_NET_HDR_F_NEEDS_CSUM) marks a packet whose
	// checksum is partial: the 16-bit field at CsumStart+CsumOffset holds the
	// folded, uncomplemented pseudo-header sum, and the real checksum is the
	// Internet checksum of everything from CsumStart to the end of the packet.
	// The kernel sets it on every packet it leaves unchecksummed (all TCP and
	// UDP sent by local sockets once TUN_F_CSUM is on) and on every GSO
	// super-packet. On write, a packet carrying it is trusted by the
	// receiving stack (CHECKSUM_PARTIAL counts as verified).
	FlagNeedsCsum uint8 = 1
	// FlagDataValid (VIRTIO_NET_HDR_F_DATA_VALID) is set by the kernel on
	// read when it already verified the packet's checksum. This package never
	// sets it on write: a packet written with no flags is verified by the
	// receiving stack as any packet from a wire would be.
	FlagDataValid uint8 = 2
)

// Values of VirtioNetHdr.GSOType (VIRTIO_NET_HDR_GSO_*).
const (
	GSONone  uint8 = 0 // a single packet, not a super-packet
	GSOTCPv4 uint8 = 1 // TSO over IPv4
	GSOUDP   uint8 = 3 // UFO (IP fragmentation of UDP); obsolete, never produced by Linux >= 4.14
	GSOTCPv6 uint8 = 4 // TSO over IPv6
	GSOUDPL4 uint8 = 5 // USO (UDP_SEGMENT) over IPv4 or IPv6
	// GSOAccECN (VIRTIO_NET_HDR_GSO_ACCECN, Linux >= 6.18) is OR-ed into a TCP
	// type: the sender uses Accurate ECN, so CWR is part of the ACE counter
	// and is kept on every segment.
	GSOAccECN uint8 = 0x10
	// GSOECN (VIRTIO_NET_HDR_GSO_ECN) is OR-ed into a TCP type when the
	// super-packet carries CWR (RFC 3168 ECN): only the first segment keeps it.
	GSOECN uint8 = 0x80
)

// VirtioNetHdr is the legacy struct virtio_net_hdr of include/uapi/linux/
// virtio_net.h, which the TUN driver exchanges with userspace in front of each
// packet when the device was opened with IFF_VNET_HDR.
//
// Byte order: the 16-bit fields are in the legacy virtio byte order, which the
// TUN driver takes to be the host's native order unless TUNSETVNETLE or
// TUNSETVNETBE was used (drivers/net/tun_vnet.h); Decode and Encode use the
// native order accordingly.
//
// Semantics relied on by this package, as set by the kernel on read
// (virtio_net_hdr_from_skb) and checked on write (virtio_net_hdr_to_skb):
//   - GSOType other than GSONone means pkt is a super-packet to be cut into
//     segments of GSOSize payload bytes each (the last may be shorter), every
//     segment carrying a copy of the IP and transport headers.
//   - HdrLen is only a hint (on read it is the length of the skb's linear
//     part, not the header length); this package computes header lengths from
//     the packet itself.
//   - CsumStart is the offset of the transport header and CsumOffset the
//     offset of its checksum field in it (16 for TCP, 6 for UDP) whenever
//     Flags has FlagNeedsCsum; GSO writes require FlagNeedsCsum and matching
//     offsets for UDP_L4, and matching offsets for TCP.
type VirtioNetHdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
}

// Decode fills h from the first VirtioNetHdrLen bytes of b.
func (h *VirtioNetHdr) Decode(b []byte) error {
	if len(b) < VirtioNetHdrLen {
		return errHdrShort
	}
	h.Flags = b[0]
	h.GSOType = b[1]
	h.HdrLen = binary.NativeEndian.Uint16(b[2:])
	h.GSOSize = binary.NativeEndian.Uint16(b[4:])
	h.CsumStart = binary.NativeEndian.Uint16(b[6:])
	h.CsumOffset = binary.NativeEndian.Uint16(b[8:])
	return nil
}

// Encode writes h into the first VirtioNetHdrLen bytes of b.
func (h VirtioNetHdr) Encode(b []byte) error {
	if len(b) < VirtioNetHdrLen {
		return errHdrBufShort
	}
	h.put(b)
	return nil
}

func (h VirtioNetHdr) put(b []byte) {
	_ = b[VirtioNetHdrLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}

// Package offload lets the link emulator read and write TUN devices opened
// with IFF_VNET_HDR and TSO/USO offloads (one read or write moves up to 64 KB,
// dozens of wire packets, instead of one) while still applying every
// impairment to each wire packet: a 64 KB TCP super-packet is never dropped,
// delayed or corrupted as one unit.
//
// It is pure Go (standard library only), does no I/O and does not allocate on
// its hot paths, not even to return an error: callers provide every buffer,
// and errors are preallocated values wrapping ErrMalformed or ErrShortBuffer.
//
// # Device setup (package tun)
//
// Open /dev/net/tun with IFF_TUN|IFF_NO_PI|IFF_VNET_HDR (the virtio_net_hdr
// is then VirtioNetHdrLen = 10 bytes, the kernel default), then call
// TUNSETOFFLOAD with CSUM, TSO4, TSO6, TSO_ECN, USO4 and USO6 (TUN_F_*); if
// the kernel answers EINVAL (USO needs Linux 6.2, and USO4 and USO6 must be
// set together), retry without the USO flags. Each
// offload flag is a promise that the reader handles that kind of packet, and
// Segment handles all of them (TSO_ECN included: CWR is kept on the first
// segment only). Without USO the kernel segments UDP GSO sends before the
// TUN, which is correct but costs quic-go its GSO advantage.
//
// # Forwarding loop
//
// For each direction of the link:
//
//	read(fd, buf)                             // buf: 10 + 65535 bytes
//	hdr.Decode(buf)                           // VirtioNetHdr
//	n, err := Segment(hdr, buf[10:m], segs, sizes)
//	if err != nil { count it, drop the read; continue }
//	for each segs[i][:sizes[i]]: enqueue into the impairment pipeline
//	                             (loss, corrupt, rate, delay, ... per packet)
//	...
//	departing := the wire packets the pipeline releases at one instant
//	k, _ := coalescer.Coalesce(departing, arena, outs)
//	for each outs[j] (j < k): write(fd, outs[j])  // header included
//
// segs are the per-packet buffers the pipeline owns (MTU-sized suffices;
// Segment needs as many as the super-packet has segments, at most 65535/MSS,
// while SegmentFrom cuts it in batches of however many buffers are at hand);
// arena is one scratch buffer of at least the departing packets' total
// length plus VirtioNetHdrLen per packet.
//
// Segment output is a set of ordinary wire packets with complete IPv4 header
// and TCP/UDP checksums, so the corrupt stage can flip a bit anywhere and the
// receiving kernel will notice, exactly as with a real link. Segment also
// completes the partial checksum of non-GSO packets (FlagNeedsCsum, which the
// kernel sets on every locally generated TCP/UDP packet once TUN_F_CSUM is
// on); Checksum does that in place when no copy is wanted.
//
// Coalesce merges only what the kernel's GRO would merge and only packets
// whose checksums verify, because a merged super-packet is written with
// FlagNeedsCsum and the receiving stack trusts it; anything else, including a
// packet the corrupt stage damaged, is written on its own with a zero header
// and is checked by the receiver as a wire packet would be. When packets
// leave the emulator one at a time (a rate-limited link), Coalesce returns
// them one per output; the gain appears when many depart together (no rate
// limit, or a burst released by a delay stage).
//
// # Kernel semantics relied on
//
//   - Read side (virtio_net_hdr_from_skb): a GSO packet has GSOType TCPv4,
//     TCPv6 or UDP_L4 (plus ECN/AccECN flags for TCP), GSOSize the MSS,
//     FlagNeedsCsum with CsumStart at the transport header, and the
//     pseudo-header sum in the checksum field; HdrLen is only the length of
//     the skb's linear part, so header lengths are taken from the packet.
//     IP total length (IPv4) or payload length (IPv6) and the UDP length
//     cover the whole super-packet.
//   - Segmentation (tcp_gso_segment, __udp_gso_segment, inet_gso_segment):
//     sequence numbers advance by GSOSize, FIN/PSH stay on the last segment,
//     CWR on the first unless AccECN, IPv4 IDs increment from the first
//     segment's ID, UDP checksums of 0 are sent as 0xffff.
//   - Write side (virtio_net_hdr_to_skb): a GSO write needs GSOSize > 0 and,
//     with FlagNeedsCsum, CsumOffset 16 for TCP and 6 for UDP; UDP_L4 also
//     needs FlagNeedsCsum. The checksum field must hold the folded
//     pseudo-header sum over the full transport length, since the kernel
//     adjusts it per segment if it ever segments the packet (forwarding, or
//     a UDP socket without UDP_GRO). A packet written without flags gets
//     CHECKSUM_NONE and the receiving stack verifies it (the kernel test
//     checks this by counting TCP InCsumErrors).
//
// # Limitations
//
// IPv6 extension headers and IPv4 fragments are not segmented (Segment
// returns an error; Linux does not produce them for TSO/USO). Coalesce does
// not merge IPv4 packets with options or with non-incrementing IDs, nor
// IPv6 packets with extension headers; it never reorders or prepends. The
// header byte order is the host's (legacy virtio), as the TUN driver uses
// unless TUNSETVNETLE/BE is called. Reads need a 10+65535-byte buffer, so the
// TUN device's gso_max_size must stay at its 64 KB default (no BIG TCP).
package offload

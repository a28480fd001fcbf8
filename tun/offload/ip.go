package offload

import "encoding/binary"

const (
	protoTCP = 6
	protoUDP = 17

	ipv4MinLen = 20
	ipv6Len    = 40
	tcpMinLen  = 20
	udpLen     = 8

	tcpCsumOff = 16 // offset of the checksum in the TCP header
	udpCsumOff = 6  // offset of the checksum in the UDP header

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
	tcpECE = 0x40
	tcpCWR = 0x80

	// maxIPPayload bounds what a 16-bit IP length field can describe: the
	// IPv4 total length, or the IPv6 payload length.
	maxIPPayload = 0xffff
)

func be16(b []byte) uint16       { return binary.BigEndian.Uint16(b) }
func be32(b []byte) uint32       { return binary.BigEndian.Uint32(b) }
func putBE16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
func putBE32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }

// isFragment reports whether the IPv4 header h has MF set or a non-zero
// fragment offset.
func isFragment(h []byte) bool { return h[6]&0x3f != 0 || h[7] != 0 }

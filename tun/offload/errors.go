package offload

import "errors"

var (
	// ErrMalformed is wrapped by every error about input that is not a
	// well-formed packet or header of the kind it claims to be.
	ErrMalformed = errors.New("offload: malformed packet")
	// ErrShortBuffer is wrapped by every error about caller-provided output
	// buffers (out, sizes, arena) that are too few or too small.
	ErrShortBuffer = errors.New("offload: output buffers too small")
)

// staticError is a preallocated error wrapping ErrMalformed or
// ErrShortBuffer. The functions on the forwarding hot path (Segment,
// SegmentFrom, Checksum, VirtioNetHdr.Decode and Encode, Coalesce) return
// only these, so that even their error paths never allocate: a flood of bad
// packets costs no garbage. The messages say what is wrong and what is
// expected, without the packet's values.
type staticError struct {
	kind error
	msg  string // the full message, "offload: ...: ..."
}

func (e *staticError) Error() string { return e.msg }
func (e *staticError) Unwrap() error { return e.kind }

func malformed(msg string) error {
	return &staticError{kind: ErrMalformed, msg: ErrMalformed.Error() + ": " + msg}
}

func shortBuffer(msg string) error {
	return &staticError{kind: ErrShortBuffer, msg: ErrShortBuffer.Error() + ": " + msg}
}

// The errors of Segment and SegmentFrom.
var (
	errNoBuffer       = shortBuffer("need at least 1 output buffer and size")
	errTooFewBuffers  = shortBuffer("fewer output buffers or sizes than the super-packet has segments (Segment needs one per segment; use SegmentFrom to segment in batches)")
	errSmallBuffer    = shortBuffer("an output buffer is shorter than the packet or segment it must hold (headers + gso_size bytes)")
	errFirstRange     = shortBuffer("SegmentFrom: first is negative or beyond the super-packet's segment count")
	errECNOnUDP       = malformed("gso_type has ECN flags, which are only valid with TCP")
	errUFO            = malformed("gso_type UDP (UFO) is not supported; enable TUN_F_USO4/6, not TUN_F_UFO")
	errGSOType        = malformed("unknown gso_type")
	errGSOSizeZero    = malformed("gso_size is 0 for a GSO packet")
	errEmpty          = malformed("empty GSO packet")
	errNeedsIPv4      = malformed("gso_type TCPv4 needs an IPv4 packet")
	errNeedsIPv6      = malformed("gso_type TCPv6 needs an IPv6 packet")
	errIPVersion      = malformed("IP version is neither 4 nor 6")
	errIPv4Short      = malformed("IPv4 packet is shorter than its 20-byte header")
	errIPv4IHL        = malformed("IPv4 header length (IHL) is below 20 bytes or beyond the packet")
	errIPv4TotalLen   = malformed("IPv4 total length does not match the packet length")
	errIPv4Fragment   = malformed("IPv4 GSO packet is a fragment")
	errIPv4Proto      = malformed("IPv4 protocol does not match gso_type")
	errIPv6Short      = malformed("IPv6 packet is shorter than its 40-byte header")
	errIPv6PayloadLen = malformed("IPv6 payload length does not match the packet length - 40")
	errIPv6NextHdr    = malformed("IPv6 next header does not match gso_type (extension headers are not supported)")
	errTCPTruncated   = malformed("TCP header truncated (fewer than 20 bytes after the IP header)")
	errTCPDataOff     = malformed("TCP data offset is below 20 bytes or beyond the packet")
	errUDPTruncated   = malformed("UDP header truncated (fewer than 8 bytes after the IP header)")
	errUDPLen         = malformed("UDP length does not match the bytes after the IP header")
	errCsumStart      = malformed("csum_start / csum_offset do not point at the packet's transport checksum")
)

// The errors of Checksum, VirtioNetHdr and Coalesce.
var (
	errChecksumGSO   = malformed("Checksum of a GSO super-packet; use Segment")
	errCsumRange     = malformed("csum_start + csum_offset + 2 exceeds the packet length")
	errHdrShort      = malformed("virtio_net_hdr needs 10 bytes")
	errHdrBufShort   = shortBuffer("virtio_net_hdr needs 10 bytes")
	errCoalesceSpace = shortBuffer("Coalesce: out has fewer entries than results, or arena is shorter than the results' total length plus 10 bytes each")
)

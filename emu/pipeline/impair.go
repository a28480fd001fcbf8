package pipeline

import "github.com/quicbench/quicbench/emu"

// reorderStage is netem's reordering: once at least gap-1 packets went the
// normal way, each packet is sent without delay with the reorder
// probability (correlated as configured), which restarts the count.
type reorderStage struct {
	c       chain
	gap     uint32
	counter uint32
	s       stream
}

// early decides from draw x whether the next packet skips the delay.
func (r *reorderStage) early(x uint64) bool {
	if r.counter+1 < r.gap {
		r.counter++
		return false
	}
	if r.c.step(x) {
		r.counter = 0
		return true
	}
	if r.counter < r.gap {
		r.counter++
	}
	return false
}

// ipHeaderLen returns the length of the IP header corruption must spare: the
// IPv4 header (IHL) or the IPv6 fixed header; 0 for anything else.
func ipHeaderLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] >> 4 {
	case 4:
		return max(20, int(b[0]&0x0f)*4)
	case 6:
		return 40
	}
	return 0
}

// flipBit flips one bit of b chosen by draw x, past the IP header, so the
// packet still reaches its destination and its transport checksum (or
// QUIC's AEAD) rejects it there. It reports false when there is no byte past
// the header.
func flipBit(b []byte, x uint64) bool {
	h := ipHeaderLen(b)
	n := len(b) - h
	if n <= 0 {
		return false
	}
	off := h + int((uint64(uint32(x))*uint64(n))>>32)
	b[off] ^= 1 << ((x >> 32) & 7)
	return true
}

// onoffStage is a periodic blackout: ON for on ns, then OFF until cycle ns,
// from the link's epoch (its first packet). cycle 0 disables it.
type onoffStage struct {
	on, cycle int64
}

// off reports whether t falls in an OFF period.
func (o *onoffStage) off(epoch, t emu.Time) bool {
	return o.cycle != 0 && int64(t-epoch)%o.cycle >= o.on
}

// nextOn returns the start of the ON period after t's cycle.
func (o *onoffStage) nextOn(epoch, t emu.Time) emu.Time {
	k := int64(t-epoch) / o.cycle
	return epoch + emu.Time((k+1)*o.cycle)
}

package forward

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/tun/offload"
)

// tsoPacket builds an IPv4 TCP super-packet of payload bytes as a TUN
// device with TSO reads it (partial checksum, gso_size mss).
func tsoPacket(payload, mss int) (offload.VirtioNetHdr, []byte) {
	const hdrLen = 20 + 20
	b := make([]byte, hdrLen+payload)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:], 100) // IPv4 ID
	b[8], b[9] = 64, 6
	copy(b[12:], []byte{10, 1, 1, 2, 10, 1, 2, 2})
	binary.BigEndian.PutUint16(b[20:], 40000)
	binary.BigEndian.PutUint16(b[22:], 443)
	binary.BigEndian.PutUint32(b[24:], 1000) // sequence number
	b[32], b[33] = 5<<4, 0x18                // data offset 20, ACK|PSH
	for i := hdrLen; i < len(b); i++ {
		b[i] = byte(i * 13)
	}
	return offload.VirtioNetHdr{GSOType: offload.GSOTCPv4, GSOSize: uint16(mss), Flags: offload.FlagNeedsCsum, CsumStart: 20, CsumOffset: 16}, b
}

// segRig is a path and a pass-through pipeline on a pool of count buffers
// of bufSize bytes.
func segRig(t *testing.T, count, bufSize int) (*path, *pipeline.Pipeline, *ioVnet) {
	t.Helper()
	pool := emu.NewPool(count, bufSize)
	link, err := pipeline.New(spec.Link{}, 1, pool)
	if err != nil {
		t.Fatal(err)
	}
	return &path{name: "up", pool: pool}, link, newIOVnet()
}

// drain dequeues every packet due at now and checks that they are the
// consecutive segments of the super-packet from the first one.
func drain(t *testing.T, p *path, link *pipeline.Pipeline, now emu.Time, super []byte, mss int) int {
	t.Helper()
	n := 0
	for pkt := link.Dequeue(now); pkt != nil; pkt = link.Dequeue(now) {
		seq := binary.BigEndian.Uint32(pkt.Data[24:])
		if want := uint32(1000 + n*mss); seq != want {
			t.Fatalf("segment %d: sequence %d, want %d", n, seq, want)
		}
		if id := binary.BigEndian.Uint16(pkt.Data[4:]); id != uint16(100+n) {
			t.Fatalf("segment %d: IPv4 ID %d", n, id)
		}
		chunk := super[40+n*mss : min(40+(n+1)*mss, len(super))]
		if len(pkt.Data) != 40+len(chunk) || string(pkt.Data[40:]) != string(chunk) {
			t.Fatalf("segment %d: %d bytes, payload differs", n, len(pkt.Data))
		}
		p.pool.Put(pkt)
		n++
	}
	return n
}

// TestSuperPacketBeyondOneBatch: a 64 KB TSO super-packet with a 300-byte
// MSS has 214 segments, more than maxSegs buffers per batch. Every one must
// reach the pipeline, in order; none is counted as a pool shortage.
func TestSuperPacketBeyondOneBatch(t *testing.T) {
	const payload, mss = 64000, 300
	const segs = (payload + mss - 1) / mss
	if segs <= maxSegs {
		t.Fatalf("%d segments: the test needs more than %d", segs, maxSegs)
	}
	p, link, io := segRig(t, 1024, 2048)
	hdr, super := tsoPacket(payload, mss)
	io.segment(p, link, hdr, super, 5)
	if got := drain(t, p, link, 5, super, mss); got != segs {
		t.Fatalf("%d segments out, want %d", got, segs)
	}
	if e, m, o := p.poolEmpty.Load(), p.malformed.Load(), p.oversize.Load(); e+m+o != 0 {
		t.Fatalf("PoolEmpty %d, Malformed %d, Oversize %d", e, m, o)
	}
	if p.pool.Available() != p.pool.Cap() {
		t.Fatalf("pool: %d of %d back", p.pool.Available(), p.pool.Cap())
	}
}

// TestSuperPacketPoolShortage: with buffers for only 150 of the 214
// segments, the first 150 go through and only the other 64 are dropped and
// counted in PoolEmpty (per wire packet).
func TestSuperPacketPoolShortage(t *testing.T) {
	const payload, mss = 64000, 300
	p, link, io := segRig(t, 150, 2048)
	hdr, super := tsoPacket(payload, mss)
	io.segment(p, link, hdr, super, 0)
	if got := drain(t, p, link, 0, super, mss); got != 150 {
		t.Fatalf("%d segments out, want 150", got)
	}
	if e := p.poolEmpty.Load(); e != 214-150 {
		t.Fatalf("PoolEmpty %d, want %d", e, 214-150)
	}
	// An exhausted pool: the whole super-packet, counted per segment.
	for p.pool.Available() > 0 {
		p.pool.Get()
	}
	io.segment(p, link, hdr, super, 0)
	if e := p.poolEmpty.Load(); e != 214-150+214 {
		t.Fatalf("PoolEmpty %d after an empty pool, want %d", e, 214-150+214)
	}
	if m, o := p.malformed.Load(), p.oversize.Load(); m+o != 0 {
		t.Fatalf("Malformed %d, Oversize %d", m, o)
	}
}

// TestSuperPacketOversizeAndMalformed: segments larger than the pool's
// buffers are counted in Oversize, not as a pool shortage; a malformed
// super-packet once in Malformed. Neither leaks a buffer.
func TestSuperPacketOversizeAndMalformed(t *testing.T) {
	p, link, io := segRig(t, 64, 300)
	hdr, super := tsoPacket(10000, 1000) // 10 segments of 1040 bytes
	io.segment(p, link, hdr, super, 0)
	if o, e := p.oversize.Load(), p.poolEmpty.Load(); o != 10 || e != 0 {
		t.Fatalf("Oversize %d, PoolEmpty %d; want 10 and 0", o, e)
	}
	super[9] = 17 // UDP in a TCP super-packet
	io.segment(p, link, hdr, super, 0)
	if m := p.malformed.Load(); m != 1 {
		t.Fatalf("Malformed %d, want 1", m)
	}
	if link.Len() != 0 || p.pool.Available() != p.pool.Cap() {
		t.Fatalf("held %d, pool %d of %d", link.Len(), p.pool.Available(), p.pool.Cap())
	}
}

// TestTransparentLinkPassesSuperPackets: over a link that impairs nothing,
// a TSO super-packet leaves as it came, header and all, in one write, and
// the link counts its wire packets and their bytes.
func TestTransparentLinkPassesSuperPackets(t *testing.T) {
	const payload, mss = 14000, 1400 // 10 segments of 40 + 1400 bytes
	hdr, super := tsoPacket(payload, mss)
	in := make([]byte, offload.VirtioNetHdrLen+len(super))
	if err := hdr.Encode(in); err != nil {
		t.Fatal(err)
	}
	copy(in[offload.VirtioNetHdrLen:], super)

	r := startRig(t, "", true)
	for i := 0; i < 3; i++ {
		if err := write(r.in.peer, in); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<17)
		n, err := read(r.out.peer, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], in) {
			t.Fatalf("super-packet %d: %d bytes out, not the %d that went in", i, n, len(in))
		}
	}
	c := r.settled(0, func(c emu.Counters) bool { return c.PacketsOut >= 30 })
	if c.PacketsIn != 30 || c.PacketsOut != 30 || c.BytesIn != 3*(payload+10*40) || c.BytesOut != c.BytesIn {
		t.Fatalf("counters %+v, want 30 wire packets of %d bytes in all", c, 3*(payload+10*40))
	}
	if s := r.fwd.Stats(0); s.Reads != 3 || s.Writes != 3 || s.Malformed+s.PoolEmpty+s.WriteErrors != 0 {
		t.Fatalf("stats %+v, want 3 reads and 3 writes", s)
	}

}

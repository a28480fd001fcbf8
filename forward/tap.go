package forward

import (
	"errors"
	"sync/atomic"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/tun/offload"
)

// The packet tap: with Options.Tap, every wire packet that crosses a
// direction of the forwarder leaves a Record in that direction's Tap, a
// ring of preallocated slots that the forwarding thread fills and another
// goroutine drains (package capture writes them to pcapng). The thread
// never blocks on it and never allocates: a record is the packet's first
// Snap bytes copied into the next free slot, and when the ring is full the
// record is not kept and counted instead (Tap.Cut). Without a tap the
// forwarding thread pays one branch per super-packet on transparent links
// and the pipeline one per verdict.

// TapOptions turn on the packet tap (Options.Tap).
type TapOptions struct {
	// Snap is how many bytes of each wire packet a record keeps: 0 means
	// DefaultSnap; larger than a packet buffer of the path's pool means the
	// whole packet.
	Snap int
	// Slots is the number of records each direction's ring holds; 0 sizes
	// it to about 16 MiB of packet bytes (at least 4096, at most 65536
	// records).
	Slots int
}

// DefaultSnap keeps the headers: IPv4 or IPv6, TCP with options or UDP,
// and the first bytes of the payload (a QUIC header and its connection
// IDs, a TLS record header and a ClientHello's random).
const DefaultSnap = 128

// RecordKind tells where a record's packet came from.
type RecordKind uint8

const (
	// KindLink: a packet through the direction's emulated link, with its
	// verdict.
	KindLink RecordKind = iota
	// KindICMP: an ICMP "fragmentation needed" message the emulator wrote
	// back towards the sender of a packet too large for the link (spec
	// mtu ... icmp): it travels the opposite direction. Its Verdict is
	// Delivered; it is in no link counter.
	KindICMP
)

// Record is one wire packet as the tap saw it.
type Record struct {
	Seq     uint64 // position in its direction's record sequence, from 0 (cut records included)
	Kind    RecordKind
	Verdict pipeline.Verdict
	Marks   pipeline.Marks
	// In is when the packet entered the emulator, At when it left it or
	// was dropped, on the forwarder's clock (emu.MonotonicClock).
	In, At emu.Time
	Delay  int64  // drawn propagation delay, ns (pipeline.Event.Delay)
	Len    uint32 // the packet's length
	// Data is the packet's first min(Len, snap) bytes. It is valid until
	// the record is released (Tap.Release).
	Data []byte
}

// Tap is one direction's ring of records. One goroutine (the consumer)
// reads it with Peek and Release; the forwarding thread writes it.
type Tap struct {
	snap int
	recs []Record
	mask uint64
	head atomic.Uint64 // slots written (published by the producer)
	tail atomic.Uint64 // slots released (by the consumer)
	cut  atomic.Uint64 // records not kept: the ring was full

	// Producer only: records offered so far (the next Seq), its own head
	// and its last view of tail.
	seq, whead, rtail uint64
	// Producer's scratch for cutting super-packets on transparent links.
	segs  [][]byte
	sizes []int

	// Consumer only: its last view of head.
	seen uint64
}

// DefaultTapSlots returns the ring size TapOptions.Slots 0 stands for,
// for records of snap bytes.
func DefaultTapSlots(snap int) int {
	n := (16 << 20) / max(snap, 1)
	return min(max(n, 4096), 65536)
}

// newTap builds a ring for records of snap bytes (bufSize: the largest
// wire packet, the pool's buffer size).
func newTap(o TapOptions, bufSize int, vnet bool) (*Tap, error) {
	snap := o.Snap
	switch {
	case snap < 0:
		return nil, errors.New("forward: tap snap length is negative")
	case snap == 0:
		snap = DefaultSnap
	case snap > bufSize:
		snap = bufSize
	}
	slots := o.Slots
	if slots == 0 {
		slots = DefaultTapSlots(snap)
	}
	if slots < 2 || slots > 1<<24 {
		return nil, errors.New("forward: tap slots must be between 2 and 16777216")
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	t := &Tap{snap: snap, recs: make([]Record, n), mask: uint64(n - 1)}
	slab := make([]byte, n*snap)
	for i := range t.recs {
		t.recs[i].Data = slab[i*snap : i*snap : (i+1)*snap]
	}
	if vnet {
		t.segs = make([][]byte, maxSegs)
		t.sizes = make([]int, maxSegs)
		seg := make([]byte, maxSegs*bufSize)
		for i := range t.segs {
			t.segs[i] = seg[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		}
	}
	return t, nil
}

// Snap returns the bytes each record keeps at most.
func (t *Tap) Snap() int { return t.snap }

// Slots returns the ring's size in records.
func (t *Tap) Slots() int { return len(t.recs) }

// Cut returns how many records were not kept because the ring was full.
// A consumer that falls behind loses records, never stalls the forwarder.
func (t *Tap) Cut() uint64 { return t.cut.Load() }

// Peek returns the oldest record not yet released, or nil when the ring
// holds none. The record stays valid until Release.
func (t *Tap) Peek() *Record {
	tail := t.tail.Load()
	if tail == t.seen {
		t.seen = t.head.Load()
		if tail == t.seen {
			return nil
		}
	}
	return &t.recs[tail&t.mask]
}

// Release frees the record Peek returned.
func (t *Tap) Release() { t.tail.Add(1) }

// Released returns how many records the consumer has released; a
// TapMark's Seq-Cut is how many had been written when it was taken.
func (t *Tap) Released() uint64 { return t.tail.Load() }

// put writes one record; the producer's only entry. Seq counts the cut
// records too, so the records of an interval between two marks are known
// by their Seq whether or not some were cut.
func (t *Tap) put(kind RecordKind, v pipeline.Verdict, m pipeline.Marks, in, at emu.Time, delay int64, data []byte) {
	seq := t.seq
	t.seq++
	h := t.whead
	if h-t.rtail >= uint64(len(t.recs)) {
		t.rtail = t.tail.Load()
		if h-t.rtail >= uint64(len(t.recs)) {
			t.cut.Add(1)
			return
		}
	}
	r := &t.recs[h&t.mask]
	r.Seq, r.Kind, r.Verdict, r.Marks, r.In, r.At, r.Delay = seq, kind, v, m, in, at, delay
	r.Len = uint32(len(data))
	r.Data = r.Data[:copy(r.Data[:t.snap], data)]
	t.whead = h + 1
	t.head.Store(h + 1)
}

// mark is the tap's side of a TapMark, taken on the producer's thread.
func (t *Tap) mark() (seq, cut uint64) { return t.seq, t.cut.Load() }

// Observe makes the tap a pipeline.Observer: every verdict of the path's
// link is recorded.
func (t *Tap) Observe(ev *pipeline.Event) {
	t.put(KindLink, ev.Verdict, ev.Marks, ev.In, ev.At, ev.Delay, ev.Data)
}

// superPacket records the wire packets of super-packet pkt, which a
// transparent link hands on whole at now: they are cut into the tap's own
// buffers (the forwarded bytes are untouched), as the pipeline would have
// seen them. A super-packet that cannot be cut is recorded as one record.
func (t *Tap) superPacket(hdr offload.VirtioNetHdr, pkt []byte, now emu.Time) {
	if t.segs == nil {
		t.put(KindLink, pipeline.Delivered, 0, now, now, 0, pkt)
		return
	}
	first := 0
	for {
		n, total, err := offload.SegmentFrom(hdr, pkt, first, t.segs, t.sizes)
		if err != nil || n == 0 {
			if first == 0 {
				t.put(KindLink, pipeline.Delivered, 0, now, now, 0, pkt)
			}
			return
		}
		for i := 0; i < n; i++ {
			t.put(KindLink, pipeline.Delivered, 0, now, now, 0, t.segs[i][:t.sizes[i]])
		}
		first += n
		if first >= total {
			return
		}
	}
}

// TapMark is one instant of a direction, taken by its forwarding thread
// between two packets: the link's counters then and the tap's position.
// The records of the interval between two marks are exactly those whose
// Seq lies in [first.Seq, second.Seq), and their verdicts count what the
// counters' difference counts, minus the records cut (Cut's difference).
type TapMark struct {
	Counters emu.Counters
	Seq      uint64 // Seq of the next record
	Cut      uint64 // records cut so far
}

// Package pipeline is quicbench's link emulator core: one direction of an
// emulated link as a pull-model pipeline of impairment stages, driven by
// explicit times and a seed, with no goroutine, timer or allocation per
// packet.
//
// A packet entering the link (Enqueue) goes through, in order:
//
//  0. the MTU: a packet larger than the link's MTU (mtu BYTES) is dropped
//     (DropMTU) before anything else, and draws no random decision: the
//     packets that fit get the decisions they would get if it had never
//     been sent. Telling its sender (ICMP "fragmentation needed", in icmp
//     mode) is the driver's job: see MTU;
//  1. the random decisions of its stages, all drawn at entry from per-stage
//     streams derived from (seed, stage), a fixed number of draws per packet:
//     duplicate, loss (random, gemodel or state), and for each copy corrupt,
//     reorder and the delay sample. The k-th packet offered to two pipelines
//     built from the same Link and seed thus gets the same decisions,
//     whatever the timing;
//  2. onoff: a packet arriving during a blackout is dropped;
//  3. the bottleneck, when the link has a rate or a trace: a FIFO queue
//     (drop-tail or CoDel, with packet and byte limits) served at the rate
//     (serialization time from the packet size) or at the trace's delivery
//     opportunities, paused during blackouts;
//  4. the delay line: each packet leaves at its bottleneck departure (or
//     entry) time plus its delay sample. Without a bottleneck, jitter
//     reorders packets as in netem; behind a rate or trace it does not
//     (FIFO), as netem does when rate is set. A reordered packet skips the
//     delay.
//
// Dequeue returns packets whose delivery time has come, applying a corrupt
// decision (one flipped bit past the IP header) at delivery. NextDeadline
// tells the driving loop when to call Dequeue next.
package pipeline

import (
	"errors"
	"fmt"
	"sync"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/emu/trace"
)

// publishEvery bounds how stale Counters can be, in Enqueue/Dequeue calls.
const publishEvery = 64

// Pipeline is one direction of an emulated link. It is driven by one
// goroutine (Enqueue, Dequeue, NextDeadline, Len and Flush are not safe for
// concurrent use); Counters may be called from any goroutine.
//
// Times passed in must come from one clock. A time earlier than one already
// passed is treated as that latest time.
type Pipeline struct {
	pool *emu.Pool
	link spec.Link
	// transparent: link impairs nothing (spec.Link.IsZero), fixed at New.
	transparent bool
	mtu         int // 0: no limit
	mtuMode     spec.MTUMode

	last    emu.Time // latest time seen
	started bool     // the first packet has arrived
	epoch   emu.Time // its arrival: phase 0 of trace and onoff
	inSeq   uint64   // packets offered so far
	seq     uint64   // entries created so far (copies included)

	// Random stages.
	dupOn      bool
	dup        chain
	dupS       stream
	loss       lossStage
	corruptOn  bool
	corrupt    chain
	corruptS   stream
	reorderOn  bool
	reorder    reorderStage
	delay      delayStage
	onoff      onoffStage
	hasJitter  bool
	copySlots  int // 1, or 2 when duplicate is on: draws per stage per packet
	fifoJitter bool

	// Bottleneck (rate or trace); bn.kind == bnNone without one.
	bn bottleneck

	dl      delayLine
	prevOut emu.Time // latest delivery time of an in-order packet (FIFO behind a bottleneck)

	maxSeqOut uint64 // highest seq delivered + 1 (0: none yet)

	c          emu.Counters // written by the driver only
	sincePub   int
	mu         sync.Mutex
	published  emu.Counters
	onDecision func(decision) // test hook: the per-packet random decisions

	obs Observer // SetObserver; nil: no events
	ev  Event    // the event being reported (no allocation per event)
}

// decision is what the random stages decided for one offered packet.
type decision struct {
	k       uint64 // index of the packet among those offered (0-based)
	dup     bool
	lost    bool
	corrupt [2]bool
	early   [2]bool // reordered
	delay   [2]int64
}

// New builds a pipeline for link l with the given seed. pool supplies the
// copies made by duplicate and takes back dropped packets: it must be the
// pool the driver's packets come from (Pool.Put panics otherwise), with
// room for the queue limit plus a bandwidth-delay product of packets. l must
// be valid (spec.Link.Validate; anything from spec.Parse is). A trace file
// named by l is read here; a bad one is an error naming the file and line.
func New(l spec.Link, seed uint64, pool *emu.Pool) (*Pipeline, error) {
	return NewReusing(l, seed, pool, nil)
}

// NewReusing is New, taking the queue memory of old, a retired pipeline
// built with the same pool, when it can: reconfiguring a link between
// samples then allocates nothing in proportion to the pool (megabytes for a
// link with a large bandwidth-delay product, and a garbage collection in
// the forwarding process). old must be retired: no driver uses it any more
// and it holds no packet (Flush emptied it). Its queues are taken from it
// (it must not be driven again); its counters stay readable. A nil old, or
// one that does not qualify, makes NewReusing allocate as New does.
func NewReusing(l spec.Link, seed uint64, pool *emu.Pool, old *Pipeline) (*Pipeline, error) {
	if pool == nil {
		return nil, errors.New("pipeline: nil pool")
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{pool: pool, link: l, copySlots: 1, transparent: l.IsZero(), mtu: int(l.MTU), mtuMode: l.MTUMode}
	capacity := pool.Cap()
	var q ring
	if old != nil && old.pool == pool && old.dl.len() == 0 && old.bn.q.len() == 0 && !old.bn.inTransit {
		p.dl = old.dl.take(capacity)
		q = old.bn.q.take(capacity)
	}
	if p.dl.fifo.buf == nil {
		p.dl = newDelayLine(capacity)
	}

	if l.Duplicate > 0 {
		p.dupOn = true
		p.dup = newChain(l.Duplicate, l.DuplicateCorr)
		p.dupS = newStream(seed, stageDuplicate)
		p.copySlots = 2
	}
	p.loss = newLossStage(l.Loss, seed)
	if l.Corrupt > 0 {
		p.corruptOn = true
		p.corrupt = newChain(l.Corrupt, l.CorruptCorr)
		p.corruptS = newStream(seed, stageCorrupt)
	}
	if l.Reorder > 0 {
		p.reorderOn = true
		gap := l.Gap
		if gap == 0 {
			gap = 1
		}
		p.reorder = reorderStage{c: newChain(l.Reorder, l.ReorderCorr), gap: gap, s: newStream(seed, stageReorder)}
	}
	p.delay = newDelayStage(l, seed)
	p.hasJitter = l.Jitter > 0
	if l.On > 0 && l.Off > 0 {
		p.onoff = onoffStage{on: int64(l.On), cycle: int64(l.On + l.Off)}
	}

	switch {
	case l.Rate > 0:
		p.bn = newRateBottleneck(l, capacity, q)
	case l.Trace != "":
		t, err := trace.Load(l.Trace)
		if err != nil {
			return nil, err
		}
		p.bn = newTraceBottleneck(l, t, capacity, q)
	}
	p.fifoJitter = p.bn.kind != bnNone
	return p, nil
}

// Transparent reports whether the link impairs nothing (spec.Link.IsZero):
// every packet leaves the instant it arrives, unchanged and in order. A
// driver may then hand packets on itself instead of enqueuing them, and
// count them with Pass.
func (p *Pipeline) Transparent() bool { return p.transparent }

// Pass counts packets wire packets of bytes bytes in all that the driver
// handed on at once over a transparent link, in and out, as Enqueue and an
// immediate Dequeue would have (no queue delay). It is for transparent
// links only: Pass on another link panics.
func (p *Pipeline) Pass(packets, bytes uint64) {
	if !p.transparent {
		panic("pipeline: Pass on a link that impairs: " + p.link.String())
	}
	p.c.PacketsIn += packets
	p.c.BytesIn += bytes
	p.c.PacketsOut += packets
	p.c.BytesOut += bytes
	p.touch()
}

// MTU returns the link's MTU in bytes (0 for none) and what is done with a
// larger packet. Enqueue drops such a packet itself (DropMTU); in
// spec.MTUICMP mode the driver, which alone knows the way back to the
// sender, answers it first (forward does, with ICMP "fragmentation needed"
// for IPv4 packets with DF set).
func (p *Pipeline) MTU() (int, spec.MTUMode) { return p.mtu, p.mtuMode }

// TooBig reports whether Enqueue would drop a packet of size bytes for
// exceeding the link's MTU.
func (p *Pipeline) TooBig(size int) bool { return p.mtu > 0 && size > p.mtu }

// Link returns the spec the pipeline was built from.
func (p *Pipeline) Link() spec.Link { return p.link }

// clock returns now, or the latest time seen if now is earlier.
func (p *Pipeline) clock(now emu.Time) emu.Time {
	if now < p.last {
		return p.last
	}
	p.last = now
	return now
}

// Enqueue offers pkt to the link at time now and takes ownership of it: the
// pipeline queues it, drops it (back to the pool) or duplicates it (a copy
// from the pool; no copy is made when the pool is empty). A nil pkt is
// ignored.
func (p *Pipeline) Enqueue(now emu.Time, pkt *emu.Packet) {
	if pkt == nil {
		return
	}
	now = p.clock(now)
	if !p.started {
		p.started, p.epoch = true, now
		p.bn.start(now)
	}
	p.serve(now)

	size := uint64(len(pkt.Data))
	p.c.PacketsIn++
	p.c.BytesIn += size

	// 0. The MTU, before any random draw.
	if p.mtu > 0 && len(pkt.Data) > p.mtu {
		p.c.DropMTU++
		if p.obs != nil {
			p.observe(DroppedMTU, 0, now, now, 0, pkt.Data)
		}
		p.pool.Put(pkt)
		p.touch()
		return
	}

	// 1. Every random decision, a fixed number of draws per stage.
	var d decision
	d.k = p.inSeq
	p.inSeq++
	if p.dupOn {
		d.dup = p.dup.step(p.dupS.u64())
	}
	d.lost = p.loss.lost()
	copies := 1
	if d.dup {
		copies++
	}
	if d.lost {
		copies--
	}
	var corruptDraw [2]uint64
	for i := 0; i < p.copySlots; i++ {
		exists := i < copies
		if p.corruptOn {
			x, y := p.corruptS.u64(), p.corruptS.u64()
			if exists {
				d.corrupt[i] = p.corrupt.step(x)
				corruptDraw[i] = y
			}
		}
		if p.reorderOn {
			x := p.reorder.s.u64()
			if exists {
				d.early[i] = p.reorder.early(x)
			}
		}
		if p.hasJitter {
			x := p.delay.s.u64()
			if exists {
				d.delay[i] = p.delay.sample(x, i == 0)
			}
		} else {
			d.delay[i] = p.delay.base
		}
	}
	if p.onDecision != nil {
		p.onDecision(d)
	}

	// 2. Blackout.
	if p.onoff.off(p.epoch, now) {
		p.c.DropOff++
		if p.obs != nil {
			p.observe(DroppedOff, 0, now, now, 0, pkt.Data)
		}
		p.pool.Put(pkt)
		p.touch()
		return
	}

	// 3. Loss and duplication: netem's count = 1 + duplicated - lost.
	if d.lost {
		p.c.DropLoss++
		if p.obs != nil {
			// Duplicated and lost: the lost copy is this one's twin.
			p.observe(DroppedLoss, 0, now, now, 0, pkt.Data)
		}
		if copies == 0 {
			p.pool.Put(pkt)
			p.touch()
			return
		}
	}
	var second *emu.Packet
	if copies == 2 {
		if second = p.pool.Get(); second != nil && len(pkt.Data) <= cap(second.Data) {
			second.Data = second.Data[:len(pkt.Data)]
			copy(second.Data, pkt.Data)
		} else if second != nil {
			p.pool.Put(second)
			second = nil
		}
	}
	if d.dup && (second != nil || d.lost) {
		p.c.Duplicated++
	}

	// 4. Into the bottleneck or the delay line. The copy that survives a
	// duplicated and lost packet is the duplicate.
	p.admit(now, pkt, &d, 0, corruptDraw[0], d.dup && d.lost)
	if second != nil {
		p.admit(now, second, &d, 1, corruptDraw[1], true)
	}
	p.touch()
}

// admit routes one copy (slot i of decision d) into the link; dup marks
// the copy made by duplicate.
func (p *Pipeline) admit(now emu.Time, pkt *emu.Packet, d *decision, i int, corruptDraw uint64, dup bool) {
	e := entry{pkt: pkt, arr: now, delay: d.delay[i], seq: p.seq, size: uint32(len(pkt.Data))}
	p.seq++
	if dup {
		e.flags |= flagDup
	}
	if d.corrupt[i] {
		e.flags |= flagCorrupt
		e.corrupt = corruptDraw
	}
	if d.early[i] {
		e.flags |= flagReordered
		e.delay = 0
	}
	if p.bn.kind != bnNone {
		if !p.bn.admit(e) {
			p.c.DropQueue++
			if p.obs != nil {
				p.observe(DroppedQueue, entryMarks(e.flags), now, now, 0, pkt.Data)
			}
			p.pool.Put(pkt)
		}
		return
	}
	e.out = now + emu.Time(e.delay)
	p.dl.insert(e)
}

// toDelayLine moves an entry that left the bottleneck at dep into the delay
// line. Behind a bottleneck, in-order packets keep FIFO order (jitter holds
// back the ones behind a late packet, as netem does with rate).
func (p *Pipeline) toDelayLine(e entry, dep emu.Time) {
	e.out = dep + emu.Time(e.delay)
	if e.flags&flagReordered == 0 && p.fifoJitter {
		if e.out < p.prevOut {
			e.out = p.prevOut
		}
		p.prevOut = e.out
	}
	p.dl.insert(e)
}

// Dequeue returns a packet whose delivery time is at or before now, handing
// its ownership to the caller, or nil when none is due.
func (p *Pipeline) Dequeue(now emu.Time) *emu.Packet {
	now = p.clock(now)
	p.serve(now)
	e := p.dl.peek()
	if e == nil || e.out > now {
		if p.sincePub > 0 {
			p.publish()
		}
		return nil
	}
	x := p.dl.pop()
	pkt := x.pkt
	var m Marks
	if x.flags&flagCorrupt != 0 && flipBit(pkt.Data, x.corrupt) {
		p.c.DropCorrupt++
		m |= MarkCorrupted
	}
	p.c.PacketsOut++
	p.c.BytesOut += uint64(x.size)
	if now-x.out > emu.LateThreshold {
		p.c.LateOut++
	}
	if x.seq+1 < p.maxSeqOut {
		p.c.Reordered++
		m |= MarkReordered
	} else {
		p.maxSeqOut = x.seq + 1
	}
	q := uint64(x.out - x.arr - emu.Time(x.delay))
	p.c.QueueDelaySumNs += q
	p.c.QueueDelayMaxNs = max(p.c.QueueDelayMaxNs, q)
	if p.obs != nil {
		p.observe(Delivered, m|entryMarks(x.flags), x.arr, now, x.delay, pkt.Data)
	}
	p.touch()
	return pkt
}

// NextDeadline returns the earliest time at which Dequeue can return a
// packet, and false when the pipeline holds none. It is exact, except that
// it may be early (Dequeue then returns nil, and NextDeadline moves on) in
// three cases: in front of CoDel, which may drop the packet it was computed
// for, while a reordered packet waits in a rate or trace queue behind
// others, and when a trace's next usable opportunity is far away behind
// onoff blackouts (the search is bounded per call; see maxOppSearch).
func (p *Pipeline) NextDeadline() (emu.Time, bool) {
	if p.sincePub > 0 {
		p.publish() // the driver is about to sleep: make Counters exact
	}
	var t emu.Time
	ok := false
	if e := p.dl.peek(); e != nil {
		t, ok = e.out, true
	}
	if bt, bok := p.bn.nextOut(p); bok && (!ok || bt < t) {
		t, ok = bt, true
	}
	return t, ok
}

// flushed reports an entry dropped by Flush to the observer, if any.
func (p *Pipeline) flushed(e *entry) {
	if p.obs != nil {
		p.observe(DroppedFlush, entryMarks(e.flags), e.arr, p.last, e.delay, e.pkt.Data)
	}
}

// Len returns the number of packets the pipeline holds.
func (p *Pipeline) Len() int { return p.dl.len() + p.bn.len() }

// Flush drops every packet the pipeline holds back to the pool (counted in
// DropFlush) and idles the bottleneck. The random streams, and the trace and
// onoff phases, go on: build a new Pipeline to restart a decision sequence.
func (p *Pipeline) Flush() {
	for p.dl.len() > 0 {
		e := p.dl.pop()
		p.flushed(&e)
		p.pool.Put(e.pkt)
		p.c.DropFlush++
	}
	p.c.DropFlush += uint64(p.bn.flush(p.pool, p.last, p.flushed))
	p.prevOut = 0
	p.publish()
}

// Counters returns the link's counters. It is safe to call from any
// goroutine. The driver publishes them when it calls NextDeadline, when
// Dequeue returns nil, on Flush, and every 64 Enqueue/Dequeue calls in
// between; a driving loop that asks NextDeadline before sleeping thus
// leaves them exact while idle.
func (p *Pipeline) Counters() emu.Counters {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published
}

func (p *Pipeline) touch() {
	p.sincePub++
	if p.sincePub >= publishEvery {
		p.publish()
	}
}

func (p *Pipeline) publish() {
	p.sincePub = 0
	p.mu.Lock()
	p.published = p.c
	p.mu.Unlock()
}

// String describes the pipeline for logs.
func (p *Pipeline) String() string {
	return fmt.Sprintf("pipeline{%s, %d held}", p.link, p.Len())
}

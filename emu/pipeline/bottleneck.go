package pipeline

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/emu/trace"
)

type bnKind uint8

const (
	bnNone  bnKind = iota
	bnRate         // served at a constant bit rate
	bnTrace        // served at a trace's delivery opportunities
)

// bottleneck is the link's capacity limit and the queue in front of it. A
// packet waits in q until the server starts it (rate) or an opportunity
// carries it (trace); then it leaves for the delay line. Limits count the
// waiting packets, not the one being transmitted, like a qdisc's.
type bottleneck struct {
	kind       bnKind
	q          ring
	qBytes     uint64
	limitPkts  int
	limitBytes uint64
	codel      codelState
	early      int // reordered packets waiting in q

	// bnRate
	rate                             uint64 // bits per second
	overhead, cellSize, cellOverhead int64
	busyUntil                        emu.Time // end of the current transmission
	rem                              uint64   // sub-ns remainder carried between back-to-back packets, in 1/rate ns
	txCache                          [64]txCached

	// bnTrace
	opp       []int64 // opportunity offsets within a period, ns
	period    int64   // ns
	epoch     emu.Time
	cur       cursor // next opportunity not yet used
	lastCycle int64  // the last cycle whose opportunities are before math.MaxInt64 ns
	credit    int64  // bytes the current opportunities can still carry
	transit   entry  // packet taken from the queue, waiting for enough credit
	inTransit bool
	searched  int // opportunities the last nextOut call examined (tests)
}

// maxOppSearch bounds the delivery opportunities nextOut examines per call.
// With onoff, an ON window may contain no opportunity for a very long time
// (a 1 ns ON window against millisecond opportunities meets one only when
// the two periods align, possibly after billions of cycles): nextOut then
// returns, as an early deadline, the time of the first opportunity it did
// not examine. The driver wakes then, Dequeue serves the skipped
// opportunities (serveTrace's work is bounded by the time that passed) and
// NextDeadline searches on from there: each call does bounded work and the
// deadlines advance by at least maxOppSearch distinct opportunity times
// (milliseconds) or onoff cycles, so the driver never spins.
const maxOppSearch = 256

// txCached is a packet size's transmission time as a quotient and remainder
// of ns, so that most packets (a few sizes recur) need no 128-bit division.
type txCached struct {
	n    int64 // wire bytes, 0 for an empty slot
	q, r uint64
}

// cursor names one delivery opportunity: index idx of repetition cycle.
type cursor struct {
	cycle int64
	idx   int
}

// newBottleneck builds the queue of a bottleneck, in q's memory when q
// (an empty ring handed over by a retired pipeline) has it.
func newBottleneck(l spec.Link, capacity int, q ring) bottleneck {
	if q.buf == nil {
		q = newRing(capacity)
	}
	b := bottleneck{q: q}
	b.limitPkts, b.limitBytes = l.QueueLimit()
	if l.Queue == spec.QueueCoDel {
		target, interval := l.CoDelParams()
		b.codel = codelState{on: true, target: int64(target), interval: int64(interval), maxPacket: trace.MTU}
	}
	return b
}

func newRateBottleneck(l spec.Link, capacity int, q ring) bottleneck {
	b := newBottleneck(l, capacity, q)
	b.kind = bnRate
	b.rate = l.Rate
	b.overhead, b.cellSize, b.cellOverhead = int64(l.PacketOverhead), int64(l.CellSize), int64(l.CellOverhead)
	return b
}

func newTraceBottleneck(l spec.Link, t *trace.Trace, capacity int, q ring) bottleneck {
	b := newBottleneck(l, capacity, q)
	b.kind = bnTrace
	ms := t.Timestamps()
	b.opp = make([]int64, len(ms))
	for i, v := range ms {
		b.opp[i] = int64(v) * int64(time.Millisecond)
	}
	b.period = b.opp[len(b.opp)-1]
	return b
}

// start sets the phase of the bottleneck at the link's first packet.
func (b *bottleneck) start(now emu.Time) {
	b.busyUntil = now
	b.epoch = now
	if b.period > 0 {
		b.lastCycle = (math.MaxInt64-max(int64(now), 0))/b.period - 1
	}
}

func (b *bottleneck) len() int {
	n := b.q.len()
	if b.inTransit {
		n++
	}
	return n
}

// admit queues e unless a limit is reached.
func (b *bottleneck) admit(e entry) bool {
	size := uint64(e.size)
	if b.limitPkts > 0 && b.q.n >= b.limitPkts || b.limitBytes > 0 && b.qBytes+size > b.limitBytes {
		return false
	}
	b.q.push(e)
	b.qBytes += size
	if e.flags&flagReordered != 0 {
		b.early++
	}
	b.codel.maxPacket = max(b.codel.maxPacket, int64(size))
	return true
}

func (b *bottleneck) pop() entry {
	e := b.q.pop()
	b.qBytes -= uint64(e.size)
	if e.flags&flagReordered != 0 {
		b.early--
	}
	return e
}

// flush returns every held packet to pool, after telling dropped about it,
// and idles the server at now.
func (b *bottleneck) flush(pool *emu.Pool, now emu.Time, dropped func(*entry)) int {
	n := 0
	for b.q.n > 0 {
		e := b.pop()
		dropped(&e)
		pool.Put(e.pkt)
		n++
	}
	if b.inTransit {
		dropped(&b.transit)
		pool.Put(b.transit.pkt)
		b.transit, b.inTransit = entry{}, false
		n++
	}
	b.busyUntil, b.rem, b.credit = now, 0, 0
	b.codel.reset()
	return n
}

// txTime returns the serialization time of a size-byte packet given the
// carried remainder rem, and the new remainder: exactly
// (wire bits * 1e9 + rem) / rate ns.
func (b *bottleneck) txTime(size int, rem uint64) (time.Duration, uint64) {
	n := int64(size) + b.overhead
	if b.cellSize > 0 {
		cells := (max(n, 0) + b.cellSize - 1) / b.cellSize
		n = cells * (b.cellSize + b.cellOverhead)
	}
	if n <= 0 {
		return 0, rem
	}
	c := &b.txCache[n&63]
	if c.n != n {
		hi, lo := bits.Mul64(uint64(n), 8e9)
		if hi >= b.rate { // beyond 2^64 ns: only for absurd packet sizes at tiny rates
			return time.Duration(math.MaxInt64 / 4), 0
		}
		c.q, c.r = bits.Div64(hi, lo, b.rate)
		c.n = n
	}
	// (q*rate + r + rem) / rate with r, rem < rate: at most one carry.
	q, r := c.q, c.r+rem
	if r >= b.rate {
		q, r = q+1, r-b.rate
	}
	return time.Duration(q), r
}

// oppTime returns when opportunity c happens.
func (b *bottleneck) oppTime(c cursor) emu.Time {
	return b.epoch + emu.Time(c.cycle*b.period+b.opp[c.idx])
}

func (b *bottleneck) next(c cursor) cursor {
	c.idx++
	if c.idx == len(b.opp) {
		c.cycle, c.idx = c.cycle+1, 0
	}
	return c
}

// firstAtOrAfter returns the first opportunity at or after t.
func (b *bottleneck) firstAtOrAfter(t emu.Time) cursor {
	if t <= b.epoch {
		return cursor{}
	}
	off := int64(t - b.epoch)
	cycle, rem := off/b.period, off%b.period
	if rem == 0 {
		// The previous cycle's last opportunities (at the period) happen at t.
		i, _ := slices.BinarySearch(b.opp, b.period)
		return cursor{cycle - 1, i}
	}
	i, _ := slices.BinarySearch(b.opp, rem)
	if i == len(b.opp) {
		return cursor{cycle + 1, 0}
	}
	return cursor{cycle, i}
}

// serve runs the bottleneck up to now: every packet whose transmission
// starts (rate) or whose opportunity comes (trace) by now moves to the delay
// line; CoDel decides at that moment.
func (p *Pipeline) serve(now emu.Time) {
	switch p.bn.kind {
	case bnRate:
		p.serveRate(now)
	case bnTrace:
		p.serveTrace(now)
	}
}

func (p *Pipeline) serveRate(now emu.Time) {
	b := &p.bn
	for b.q.n > 0 {
		s := max(b.busyUntil, b.q.peek().arr)
		if p.onoff.off(p.epoch, s) {
			s = p.onoff.nextOn(p.epoch, s)
		}
		if s > now {
			return
		}
		var e entry
		if b.codel.on {
			var ok bool
			if e, ok = p.codelDequeue(s); !ok {
				continue
			}
		} else {
			e = b.pop()
		}
		if s > b.busyUntil {
			b.rem = 0 // the link was idle: nothing to carry
		}
		var tx time.Duration
		tx, b.rem = b.txTime(int(e.size), b.rem)
		b.busyUntil = s.Add(tx)
		p.toDelayLine(e, b.busyUntil)
	}
}

func (p *Pipeline) serveTrace(now emu.Time) {
	b := &p.bn
	for b.inTransit || b.q.n > 0 {
		if b.cur.cycle > b.lastCycle {
			return // beyond the clock's range: never
		}
		t := b.oppTime(b.cur)
		if !b.inTransit {
			if arr := b.q.peek().arr; t < arr {
				// The queue was empty at these opportunities: they are lost.
				b.credit = 0
				b.cur = b.firstAtOrAfter(arr)
				continue
			}
		}
		if t > now {
			return
		}
		if p.onoff.off(p.epoch, t) {
			b.cur = b.firstAtOrAfter(p.onoff.nextOn(p.epoch, t))
			continue
		}
		b.credit += trace.MTU
		for {
			if !b.inTransit {
				if b.q.n == 0 || b.q.peek().arr > t {
					break
				}
				if b.codel.on {
					e, ok := p.codelDequeue(t)
					if !ok {
						break
					}
					b.transit = e
				} else {
					b.transit = b.pop()
				}
				b.inTransit = true
			}
			size := int64(b.transit.size)
			if size > b.credit {
				break
			}
			b.credit -= size
			e := b.transit
			b.transit, b.inTransit = entry{}, false
			p.toDelayLine(e, t)
		}
		if !b.inTransit && (b.q.n == 0 || b.q.peek().arr > t) {
			b.credit = 0 // unused capacity is not saved
		}
		b.cur = b.next(b.cur)
	}
}

// outTime is when an entry leaving the bottleneck at dep will be delivered.
func (p *Pipeline) outTime(e *entry, dep emu.Time) emu.Time {
	out := dep + emu.Time(e.delay)
	if e.flags&flagReordered == 0 && p.fifoJitter {
		out = max(out, p.prevOut)
	}
	return out
}

// nextOut returns when the next packet to leave the bottleneck will be
// delivered (assuming CoDel keeps it), and false if the bottleneck is empty.
// While a reordered packet waits behind others it may be delivered first
// (it skips the delay): the head's departure, a lower bound, is returned
// then.
func (b *bottleneck) nextOut(p *Pipeline) (emu.Time, bool) {
	switch b.kind {
	case bnRate:
		if b.q.n == 0 {
			return 0, false
		}
		head := b.q.peek()
		s := max(b.busyUntil, head.arr)
		if p.onoff.off(p.epoch, s) {
			s = p.onoff.nextOn(p.epoch, s)
		}
		rem := b.rem
		if s > b.busyUntil {
			rem = 0
		}
		tx, _ := b.txTime(int(head.size), rem)
		dep := s.Add(tx)
		if b.early > 0 {
			return min(dep, p.outTime(head, dep)), true
		}
		return p.outTime(head, dep), true
	case bnTrace:
		var e *entry
		c, credit := b.cur, b.credit
		switch {
		case b.inTransit:
			e = &b.transit
		case b.q.n > 0:
			e = b.q.peek()
			if b.oppTime(c) < e.arr {
				c, credit = b.firstAtOrAfter(e.arr), 0
			}
		default:
			return 0, false
		}
		size := int64(e.size)
		for steps := 0; ; steps++ {
			if c.cycle > b.lastCycle {
				// Beyond the clock's range (a trace period of years): never.
				b.searched = steps
				return math.MaxInt64, true
			}
			t := b.oppTime(c)
			// Past the bound, t (not examined) is a lower bound of the
			// departure: an early deadline (see maxOppSearch).
			found := steps == maxOppSearch
			if !found {
				if p.onoff.off(p.epoch, t) {
					c = b.firstAtOrAfter(p.onoff.nextOn(p.epoch, t))
					continue
				}
				credit += trace.MTU
				found = size <= credit
			}
			if found {
				b.searched = steps
				if b.early > 0 {
					return min(t, p.outTime(e, t)), true
				}
				return p.outTime(e, t), true
			}
			c = b.next(c)
		}
	}
	return 0, false
}

// codelState is CoDel's state (RFC 8289, section 5).
type codelState struct {
	on               bool
	target, interval int64
	maxPacket        int64 // bytes; "queue below one MTU" is never above target
	count, lastCount uint32
	dropping         bool
	aboveSet         bool
	firstAbove       emu.Time
	dropNext         emu.Time
}

func (c *codelState) reset() {
	if c.on {
		*c = codelState{on: true, target: c.target, interval: c.interval, maxPacket: c.maxPacket}
	}
}

func (c *codelState) controlLaw(t emu.Time, count uint32) emu.Time {
	return t + emu.Time(float64(c.interval)/math.Sqrt(float64(count)))
}

// codelDodequeue takes the head of the queue at time now (packets that
// arrived after now are not there yet) and tells whether CoDel may drop it.
func (p *Pipeline) codelDodequeue(now emu.Time) (e entry, okToDrop, got bool) {
	b, c := &p.bn, &p.bn.codel
	if b.q.n == 0 || b.q.peek().arr > now {
		c.aboveSet = false
		return entry{}, false, false
	}
	e = b.pop()
	sojourn := int64(now - e.arr)
	if sojourn < c.target || !b.backlogAbove(now, c.maxPacket) {
		c.aboveSet = false
	} else if !c.aboveSet {
		c.aboveSet, c.firstAbove = true, now+emu.Time(c.interval)
	} else if now >= c.firstAbove {
		okToDrop = true
	}
	return e, okToDrop, true
}

// backlogAbove reports whether the bytes queued at time now exceed limit.
func (b *bottleneck) backlogAbove(now emu.Time, limit int64) bool {
	var sum int64
	for i := 0; i < b.q.n; i++ {
		e := b.q.at(i)
		if e.arr > now {
			return false
		}
		if sum += int64(e.size); sum > limit {
			return true
		}
	}
	return false
}

// codelDrop drops e, taken from the queue at time t.
func (p *Pipeline) codelDrop(e entry, t emu.Time) {
	p.c.DropQueue++
	if p.obs != nil {
		p.observe(DroppedQueue, entryMarks(e.flags), e.arr, t, 0, e.pkt.Data)
	}
	p.pool.Put(e.pkt)
}

// codelDequeue is RFC 8289's dequeue at time now: it returns the packet to
// transmit, dropping what the control law says first; false when every
// packet present at now was dropped (or none was there).
func (p *Pipeline) codelDequeue(now emu.Time) (entry, bool) {
	c := &p.bn.codel
	e, okToDrop, got := p.codelDodequeue(now)
	if c.dropping {
		if !okToDrop {
			c.dropping = false
		}
		for got && c.dropping && now >= c.dropNext {
			p.codelDrop(e, now)
			c.count++
			e, okToDrop, got = p.codelDodequeue(now)
			if !okToDrop {
				c.dropping = false
			} else {
				c.dropNext = c.controlLaw(c.dropNext, c.count)
			}
		}
	} else if okToDrop {
		p.codelDrop(e, now)
		e, _, got = p.codelDodequeue(now)
		c.dropping = true
		delta := c.count - c.lastCount
		c.count = 1
		if delta > 1 && int64(now-c.dropNext) < 16*c.interval {
			c.count = delta
		}
		c.dropNext = c.controlLaw(now, c.count)
		c.lastCount = c.count
	}
	return e, got
}

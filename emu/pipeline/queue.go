package pipeline

import "github.com/quicbench/quicbench/emu"

// entry is a packet inside the pipeline with its bookkeeping. Entries are
// values in preallocated rings and heaps: nothing is allocated per packet.
type entry struct {
	pkt     *emu.Packet
	arr     emu.Time // when it entered the link
	out     emu.Time // when it leaves the link (set once it is in the delay line)
	delay   int64    // its drawn propagation delay, ns (0 when reordered)
	seq     uint64   // order of entry into the link (a copy right after its original)
	corrupt uint64   // corruption draw; used when flags&flagCorrupt
	size    uint32   // len(pkt.Data) at entry: no need to touch the packet
	flags   uint8
}

const (
	flagReordered uint8 = 1 << iota // skips the propagation delay
	flagCorrupt                     // gets one bit flipped on delivery
	flagDup                         // the extra copy made by duplicate
)

// before orders entries by delivery time, then by entry order.
func before(a, b *entry) bool {
	return a.out < b.out || a.out == b.out && a.seq < b.seq
}

// ring is a FIFO of entries in a power-of-two circular buffer.
type ring struct {
	buf  []entry
	head int
	n    int
}

func newRing(capacity int) ring {
	c := 16
	for c < capacity {
		c <<= 1
	}
	return ring{buf: make([]entry, c)}
}

func (r *ring) len() int { return r.n }

// take hands r's memory over to a new ring when r is empty and holds at
// least capacity entries (a zero ring otherwise), leaving r without it.
func (r *ring) take(capacity int) ring {
	if r.n != 0 || len(r.buf) < capacity {
		return ring{}
	}
	nr := ring{buf: r.buf}
	*r = ring{}
	return nr
}

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

func (r *ring) grow() {
	nb := make([]entry, 2*len(r.buf))
	for i := 0; i < r.n; i++ {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// peek returns the oldest entry; the ring must not be empty.
func (r *ring) peek() *entry { return &r.buf[r.head] }

// at returns the i-th oldest entry.
func (r *ring) at(i int) *entry { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// tail returns the newest entry; the ring must not be empty.
func (r *ring) tail() *entry { return r.at(r.n - 1) }

func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return e
}

// hitem is a heap node: the ordering key and where the entry lives.
type hitem struct {
	out  emu.Time
	seq  uint64
	slot int32
}

func (a *hitem) before(b *hitem) bool {
	return a.out < b.out || a.out == b.out && a.seq < b.seq
}

// entryHeap is a 4-ary min-heap of entries ordered by before. Entries stay
// put in a slab; the heap moves 24-byte nodes, and its shallow 4-ary shape
// halves the levels a push or pop walks.
type entryHeap struct {
	nodes []hitem
	slab  []entry
	free  []int32
}

func newEntryHeap(capacity int) entryHeap {
	return entryHeap{nodes: make([]hitem, 0, capacity), slab: make([]entry, 0, capacity), free: make([]int32, 0, capacity)}
}

func (h *entryHeap) len() int { return len(h.nodes) }

func (h *entryHeap) push(e entry) {
	var slot int32
	if n := len(h.free); n > 0 {
		slot = h.free[n-1]
		h.free = h.free[:n-1]
		h.slab[slot] = e
	} else {
		slot = int32(len(h.slab))
		h.slab = append(h.slab, e)
	}
	h.nodes = append(h.nodes, hitem{out: e.out, seq: e.seq, slot: slot})
	s := h.nodes
	i := len(s) - 1
	x := s[i]
	for i > 0 {
		parent := (i - 1) / 4
		if !x.before(&s[parent]) {
			break
		}
		s[i] = s[parent]
		i = parent
	}
	s[i] = x
}

// top returns the first entry; the heap must not be empty.
func (h *entryHeap) top() *entry { return &h.slab[h.nodes[0].slot] }

func (h *entryHeap) pop() entry {
	s := h.nodes
	slot := s[0].slot
	last := len(s) - 1
	x := s[last]
	s = s[:last]
	h.nodes = s
	if last > 0 {
		i := 0
		for {
			c := 4*i + 1
			if c >= last {
				break
			}
			m := c
			for k := c + 1; k < c+4 && k < last; k++ {
				if s[k].before(&s[m]) {
					m = k
				}
			}
			if !s[m].before(&x) {
				break
			}
			s[i] = s[m]
			i = m
		}
		s[i] = x
	}
	e := h.slab[slot]
	h.slab[slot] = entry{}
	h.free = append(h.free, slot)
	return e
}

// delayLine holds packets until their delivery time, like netem's tfifo: a
// FIFO for the common in-order case (constant delay, or jitter behind a
// rate) and a heap for packets that overtake others (jitter without rate,
// reorder), so in-order traffic costs O(1) per packet.
type delayLine struct {
	fifo ring
	heap entryHeap
}

func newDelayLine(capacity int) delayLine {
	return delayLine{fifo: newRing(capacity), heap: newEntryHeap(capacity)}
}

// take hands d's memory over to a new delay line when d is empty and sized
// for capacity (a zero delay line otherwise), leaving d without it.
func (d *delayLine) take(capacity int) delayLine {
	h := d.heap
	if d.len() != 0 || cap(h.nodes) < capacity || cap(h.slab) < capacity || cap(h.free) < capacity {
		return delayLine{}
	}
	fifo := d.fifo.take(capacity)
	if fifo.buf == nil {
		return delayLine{}
	}
	clear(h.slab[:cap(h.slab)]) // drop stale packet references
	*d = delayLine{}
	return delayLine{fifo: fifo, heap: entryHeap{nodes: h.nodes[:0], slab: h.slab[:0], free: h.free[:0]}}
}

func (d *delayLine) len() int { return d.fifo.len() + d.heap.len() }

func (d *delayLine) insert(e entry) {
	if d.fifo.n == 0 || !before(&e, d.fifo.tail()) {
		d.fifo.push(e)
		return
	}
	d.heap.push(e)
}

// fromHeap reports whether the next entry comes from the heap.
func (d *delayLine) fromHeap() bool {
	if d.heap.len() == 0 {
		return false
	}
	if d.fifo.n == 0 {
		return true
	}
	top := &d.heap.nodes[0]
	f := d.fifo.peek()
	return top.out < f.out || top.out == f.out && top.seq < f.seq
}

// peek returns the next entry to deliver, or nil.
func (d *delayLine) peek() *entry {
	if d.fromHeap() {
		return d.heap.top()
	}
	if d.fifo.n > 0 {
		return d.fifo.peek()
	}
	return nil
}

// pop removes the entry peek returned; the line must not be empty.
func (d *delayLine) pop() entry {
	if d.fromHeap() {
		return d.heap.pop()
	}
	return d.fifo.pop()
}

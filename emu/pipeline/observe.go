package pipeline

import "github.com/quicbench/quicbench/emu"

// Verdict is what a link did with one copy of a packet: delivered it, or
// dropped it and why. Every copy a pipeline takes in (each packet offered
// to Enqueue, and each extra copy made by duplicate) ends in exactly one
// verdict, reported to the pipeline's Observer.
type Verdict uint8

// Verdicts, one per counter of emu.Counters that ends a copy's life.
const (
	Delivered    Verdict = iota // left the link (Counters.PacketsOut)
	DroppedLoss                 // the loss model (Counters.DropLoss)
	DroppedQueue                // the queue was full, or CoDel dropped it (Counters.DropQueue)
	DroppedMTU                  // larger than the link's mtu (Counters.DropMTU)
	DroppedOff                  // arrived during an onoff blackout (Counters.DropOff)
	DroppedFlush                // held when the link was flushed (Counters.DropFlush)
)

// String names the verdict as the capture's packet comments do.
func (v Verdict) String() string {
	switch v {
	case Delivered:
		return "delivered"
	case DroppedLoss:
		return "dropped by loss"
	case DroppedQueue:
		return "dropped by queue"
	case DroppedMTU:
		return "dropped by mtu"
	case DroppedOff:
		return "dropped by blackout"
	case DroppedFlush:
		return "dropped by flush"
	}
	return "verdict?"
}

// Marks qualify a verdict; several may be set.
type Marks uint8

const (
	// MarkDuplicate: the copy is the extra one made by duplicate
	// (Counters.Duplicated counts these). When the loss model drops a
	// duplicated packet, one copy survives: the dropped copy is reported
	// as DroppedLoss and the other carries this mark, as netem counts it.
	MarkDuplicate Marks = 1 << iota
	// MarkReordered: delivered after a packet that entered the link later
	// (Counters.Reordered, RFC 4737's late packets).
	MarkReordered
	// MarkCorrupted: delivered with one bit flipped (Counters.DropCorrupt);
	// the receiver's checksum or AEAD drops it.
	MarkCorrupted
	// MarkEarly: the reorder stage sent it without its delay (the packets
	// it overtakes are the ones marked MarkReordered).
	MarkEarly
)

// Event is one copy's verdict. Data is the copy's bytes as the link
// delivered them (a corrupted copy with its flipped bit) or as it arrived
// (a dropped one); it is valid only during the Observe call.
type Event struct {
	Verdict Verdict
	Marks   Marks
	// In is when the copy entered the link; At when it left it or was
	// dropped (At == In for drops on entry: loss, mtu, blackout, a full
	// queue). Both are times the driver passed in.
	In, At emu.Time
	// Delay is the copy's drawn propagation delay in ns (0 for a copy
	// reordered early, and for drops decided before the delay line).
	Delay int64
	Data  []byte
}

// Observer sees every copy's verdict, on the pipeline's driving goroutine,
// as it is decided: a packet capture, for instance. Observe must not keep
// ev or ev.Data, must not call the pipeline, and should return quickly:
// it runs inside Enqueue, Dequeue and Flush.
type Observer interface {
	Observe(ev *Event)
}

// SetObserver makes o see every verdict from now on (nil: none, the
// default, which costs the pipeline one branch per event). Set it before
// the pipeline is driven, or from its driving goroutine.
func (p *Pipeline) SetObserver(o Observer) { p.obs = o }

// observe reports one verdict to the observer, which must be set.
func (p *Pipeline) observe(v Verdict, m Marks, in, at emu.Time, delay int64, data []byte) {
	p.ev = Event{Verdict: v, Marks: m, In: in, At: at, Delay: delay, Data: data}
	p.obs.Observe(&p.ev)
	p.ev.Data = nil
}

// entryMarks are the marks an entry carries from its entry into the link.
func entryMarks(flags uint8) Marks {
	var m Marks
	if flags&flagDup != 0 {
		m |= MarkDuplicate
	}
	if flags&flagReordered != 0 {
		m |= MarkEarly
	}
	return m
}

// Sync makes the counters Counters returns exact now and returns them. It
// is for the driver (it runs on the driving goroutine, like Enqueue): a
// packet capture cut at this instant holds exactly the verdicts these
// counters count.
func (p *Pipeline) Sync() emu.Counters {
	p.publish()
	return p.c
}

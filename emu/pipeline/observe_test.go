package pipeline

import (
	"bytes"
	"testing"

	"github.com/quicbench/quicbench/emu"
)

// tally counts the events an observer saw, per verdict and mark.
type tally struct {
	verdict         [DroppedFlush + 1]uint64
	dup, late, corr uint64
	early           uint64
	bytesOut        uint64
	badTimes        int
	delivered       map[uint64][][]byte // id -> data of each delivered copy
}

func (t *tally) Observe(ev *Event) {
	t.verdict[ev.Verdict]++
	if ev.Marks&MarkDuplicate != 0 {
		t.dup++
	}
	if ev.Marks&MarkReordered != 0 {
		t.late++
	}
	if ev.Marks&MarkCorrupted != 0 {
		t.corr++
	}
	if ev.Marks&MarkEarly != 0 {
		t.early++
	}
	if ev.At < ev.In {
		t.badTimes++
	}
	if ev.Verdict == Delivered {
		t.bytesOut += uint64(len(ev.Data))
		if t.delivered == nil {
			t.delivered = map[uint64][][]byte{}
		}
		id := uint64(0)
		if len(ev.Data) >= 20 {
			id = idOf(&emu.Packet{Data: ev.Data})
		}
		t.delivered[id] = append(t.delivered[id], append([]byte(nil), ev.Data...))
	}
}

// TestObserverMatchesCounters drives links with every impairment through
// a pipeline with an observer, and checks that the events it saw count
// exactly what the counters count: each copy one verdict, the marks the
// duplicated, reordered and corrupted packets, and the delivered bytes
// equal to what Dequeue returned.
func TestObserverMatchesCounters(t *testing.T) {
	links := []string{
		"delay 10ms 5ms loss 5%",
		"delay 10ms duplicate 20% loss 30%",
		"delay 10ms reorder 25% 50% gap 3 corrupt 10%",
		"rate 20mbit delay 5ms limit 20 loss 2% duplicate 5%",
		"rate 20mbit delay 5ms queue codel limit 200",
		"rate 10mbit delay 20ms 10ms reorder 10% onoff 50ms 20ms",
		"delay 2ms mtu 1000",
		"delay 30ms 20ms distribution pareto corrupt 5% duplicate 10%",
	}
	for _, s := range links {
		t.Run(s, func(t *testing.T) {
			p, pool := build(t, s, 7)
			var tl tally
			p.SetObserver(&tl)
			arr := spread(3000)
			for i := range arr {
				arr[i].at = arr[i].at / 4 // denser: fill the queues
			}
			got := drive(t, p, pool, arr[:2000], false)
			// The rest are flushed while held.
			for _, a := range arr[2000:2200] {
				p.Enqueue(a.at+200*ms, mkpkt(t, pool, a.id, a.size))
			}
			held := p.Len()
			p.Flush()
			c := p.Counters()
			checks := []struct {
				what      string
				got, want uint64
			}{
				{"delivered", tl.verdict[Delivered], c.PacketsOut},
				{"loss", tl.verdict[DroppedLoss], c.DropLoss},
				{"queue", tl.verdict[DroppedQueue], c.DropQueue},
				{"mtu", tl.verdict[DroppedMTU], c.DropMTU},
				{"blackout", tl.verdict[DroppedOff], c.DropOff},
				{"flush", tl.verdict[DroppedFlush], c.DropFlush},
				{"duplicate", tl.dup, c.Duplicated},
				{"reordered", tl.late, c.Reordered},
				{"corrupted", tl.corr, c.DropCorrupt},
				{"bytes out", tl.bytesOut, c.BytesOut},
				{"delivered (Dequeue)", uint64(len(got)), c.PacketsOut},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s: observer saw %d, counters say %d", ch.what, ch.got, ch.want)
				}
			}
			if c.DropFlush != uint64(held) {
				t.Errorf("flushed %d, held %d", c.DropFlush, held)
			}
			var total uint64
			for _, n := range tl.verdict {
				total += n
			}
			if total != c.PacketsIn+c.Duplicated {
				t.Errorf("%d verdicts for %d packets in + %d duplicates", total, c.PacketsIn, c.Duplicated)
			}
			if tl.badTimes > 0 {
				t.Errorf("%d events left before they entered", tl.badTimes)
			}
			// What the observer saw delivered is what Dequeue returned.
			for _, d := range got {
				copies := tl.delivered[d.id]
				found := false
				for _, b := range copies {
					if bytes.Equal(b, d.data) {
						found = true
					}
				}
				if !found {
					t.Fatalf("packet %d delivered as Dequeue returned it was not observed", d.id)
				}
			}
		})
	}
}

// TestObserverEarlyMarks checks MarkEarly against the reorder decisions.
func TestObserverEarlyMarks(t *testing.T) {
	p, pool, ds := record(t, "delay 10ms reorder 30%", 3)
	var tl tally
	p.SetObserver(&tl)
	drive(t, p, pool, spread(1000), false)
	var early uint64
	for _, d := range *ds {
		if !d.lost && d.early[0] {
			early++
		}
	}
	if early == 0 || tl.early != early {
		t.Fatalf("observer saw %d early packets, the reorder stage sent %d", tl.early, early)
	}
}

// TestObserverOff checks that a pipeline without an observer behaves the
// same as one with: the observer only watches.
func TestObserverOff(t *testing.T) {
	const s = "rate 20mbit delay 5ms 2ms limit 30 loss 3% duplicate 5% reorder 5% corrupt 2%"
	p1, pool1 := build(t, s, 11)
	p2, pool2 := build(t, s, 11)
	p2.SetObserver(&tally{})
	a := drive(t, p1, pool1, spread(2000), false)
	b := drive(t, p2, pool2, spread(2000), false)
	if len(a) != len(b) {
		t.Fatalf("delivered %d without an observer, %d with", len(a), len(b))
	}
	for i := range a {
		if a[i].at != b[i].at || a[i].id != b[i].id || !bytes.Equal(a[i].data, b[i].data) {
			t.Fatalf("delivery %d differs with an observer", i)
		}
	}
	if p1.Counters() != p2.Counters() {
		t.Fatalf("counters differ: %+v vs %+v", p1.Counters(), p2.Counters())
	}
}

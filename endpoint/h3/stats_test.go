package h3

import (
	"sync"
	"testing"

	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

type qlogEvent = qlogwriter.Event

// fwd is the next recorder: it counts what it receives.
type fwd struct {
	n      int
	closed bool
}

func (f *fwd) RecordEvent(qlogwriter.Event) { f.n++ }
func (f *fwd) Close() error                 { f.closed = true; return nil }

func TestRecorderCounts(t *testing.T) {
	c := new(counters)
	next := &fwd{}
	var written sync.WaitGroup
	written.Add(1)
	tr := &trace{c: c, written: &written, producers: 1}
	r := &recorder{c: c, t: tr, next: next}
	for _, ev := range []qlogEvent{
		qlog.PacketLost{},
		qlog.PacketLost{IsMTUProbePacket: true}, // not a retransmission
		qlog.PacketLost{},
		qlog.PTOCountUpdated{PTOCount: 1},
		qlog.PTOCountUpdated{PTOCount: 2},
		qlog.PTOCountUpdated{PTOCount: 0}, // reset on progress
		qlog.PTOCountUpdated{PTOCount: 1},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateSlowStart},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateRecovery},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateCongestionAvoidance},
		qlog.CongestionStateUpdated{State: qlog.CongestionStateRecovery},
		qlog.MTUUpdated{Value: 1400},
	} {
		r.RecordEvent(ev)
	}
	if got := c.lost.Load(); got != 2 {
		t.Errorf("lost %d, want 2", got)
	}
	if got := c.ptos.Load(); got != 3 {
		t.Errorf("PTOs %d, want 3", got)
	}
	if got := c.recoveries.Load(); got != 2 {
		t.Errorf("recoveries %d, want 2", got)
	}
	if got := c.stateChange.Load(); got != 4 {
		t.Errorf("state changes %d, want 4", got)
	}
	if next.n != 12 {
		t.Errorf("forwarded %d events, want 12", next.n)
	}
	if err := r.Close(); err != nil || !next.closed {
		t.Errorf("close: %v, forwarded %v", err, next.closed)
	}
	written.Wait() // the last producer's close marks the file written

}

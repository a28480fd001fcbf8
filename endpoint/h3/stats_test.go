package h3

import (
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/quicbench/quicbench/model"
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

func TestStatsFrom(t *testing.T) {
	s := quic.ConnectionStats{
		SmoothedRTT:      12500 * time.Microsecond,
		MeanDeviation:    1500 * time.Microsecond,
		MinRTT:           10 * time.Millisecond,
		CongestionWindow: 64000,
		PacketsSent:      1000,
		PacketsLost:      7,
		BytesLost:        9000,
	}
	c := new(counters)
	c.lost.Store(6)
	c.ptos.Store(2)
	c.recoveries.Store(3)
	c.stateChange.Store(5) // the initial slow start and 4 changes
	got := statsFrom(s, c)
	want := model.TransportStats{
		Kind:                   "quic",
		CongestionAlgo:         "reno",
		SmoothedRTTms:          12.5,
		RTTVarms:               1.5,
		MinRTTms:               10,
		CwndBytes:              64000,
		PacketsSent:            1000,
		PacketsLost:            7,
		BytesRetransmitted:     9000,
		Retransmits:            6,
		PTOCount:               2,
		CongestionEvents:       3,
		CongestionStateChanges: 4,
	}
	if got != want {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
	// Without tracing, retransmissions are the packets quic-go declared
	// lost (MTU probes included), and the event-only figures are marked as
	// not measured rather than zero.
	got = statsFrom(s, nil)
	if got.Retransmits != int64(s.PacketsLost) || got.PTOCount != model.NotMeasured || got.CongestionEvents != model.NotMeasured ||
		got.CongestionStateChanges != model.NotMeasured || got.PacketsSent != 1000 {
		t.Fatalf("untraced: %+v", got)
	}
	// A traced connection that only announced its initial state.
	c = new(counters)
	c.stateChange.Store(1)
	if got := statsFrom(s, c); got.CongestionStateChanges != 0 {
		t.Fatalf("initial state counted as a change: %d", got.CongestionStateChanges)
	}
}

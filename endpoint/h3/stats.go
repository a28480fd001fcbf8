package h3

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/quicbench/quicbench/model"
)

// counters are the per-connection figures quicbench takes from quic-go's
// qlog event stream, for what quic.ConnectionStats does not carry.
type counters struct {
	lost        atomic.Int64 // recovery:packet_lost, MTU probes excluded
	ptos        atomic.Int64 // PTO expirations (pto_count increments)
	recoveries  atomic.Int64 // congestion state entries into "recovery"
	stateChange atomic.Int64 // all congestion state updates, the initial slow start included
}

// trace is a qlogwriter.Trace that counts the events quicbench needs and,
// when a qlog file is wanted, forwards every event to it.
type trace struct {
	c    *counters
	file *qlogwriter.FileSeq // nil without qlog output
	// With a file: written is done when the last producer closed, i.e.
	// when the file is complete and closed.
	written   *sync.WaitGroup
	mu        sync.Mutex
	producers int
}

func (t *trace) AddProducer() qlogwriter.Recorder {
	r := &recorder{c: t.c, t: t}
	if t.file != nil {
		t.mu.Lock()
		t.producers++
		t.mu.Unlock()
		r.next = t.file.AddProducer()
	}
	return r
}

type recorder struct {
	c    *counters
	t    *trace
	next qlogwriter.Recorder
}

func (r *recorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketLost:
		if !e.IsMTUProbePacket {
			r.c.lost.Add(1)
		}
	case qlog.PTOCountUpdated:
		// pto_count grows by one per expiry and is reset to 0 on
		// progress; each non-zero update is one expiry.
		if e.PTOCount > 0 {
			r.c.ptos.Add(1)
		}
	case qlog.CongestionStateUpdated:
		r.c.stateChange.Add(1)
		if e.State == qlog.CongestionStateRecovery {
			r.c.recoveries.Add(1)
		}
	}
	if r.next != nil {
		r.next.RecordEvent(ev)
	}
}

func (r *recorder) Close() error {
	if r.next == nil {
		return nil
	}
	err := r.next.Close() // the last one blocks until the file is written
	r.t.mu.Lock()
	r.t.producers--
	last := r.t.producers == 0
	r.t.mu.Unlock()
	if last {
		r.t.written.Done()
	}
	return err
}

// tracer returns a quic.Config.Tracer that attaches counters to every
// connection (fixed, else taken from the context, else new) and writes qlog
// files into dir when it is not empty; written counts the qlog files not
// yet complete. Errors creating a qlog file are reported through logf and
// leave the connection untraced on disk.
func tracer(dir string, fixed *counters, written *sync.WaitGroup, logf func(string, ...any)) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
		c := fixed
		if c == nil {
			c, _ = ctx.Value(countersKey{}).(*counters)
		}
		if c == nil {
			c = new(counters)
		}
		t := &trace{c: c, written: written}
		if dir != "" {
			fs, err := qlogFile(dir, isClient, id)
			if err != nil {
				if logf != nil {
					logf("qlog: %v", err)
				}
			} else {
				t.file = fs
				written.Add(1)
			}
		}
		return t
	}
}

type countersKey struct{}

func qlogFile(dir string, isClient bool, id quic.ConnectionID) (*qlogwriter.FileSeq, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	role := "server"
	if isClient {
		role = "client"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s_%s.sqlog", id, role)))
	if err != nil {
		return nil, err
	}
	fs := qlogwriter.NewConnectionFileSeq(&bufferedFile{w: bufio.NewWriterSize(f, 64<<10), f: f}, isClient, id)
	go fs.Run()
	return fs, nil
}

type bufferedFile struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func (b *bufferedFile) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

func (b *bufferedFile) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.w.Flush()
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// statsOf assembles the transport statistics of a QUIC connection from
// quic-go's ConnectionStats and the traced counters.
func statsOf(conn *quic.Conn, c *counters) model.TransportStats {
	return statsFrom(conn.ConnectionStats(), c)
}

// statsFrom maps quic-go's connection statistics and the traced counters
// (nil when tracing is off) to TransportStats; docs/metrics.md defines each
// field.
func statsFrom(s quic.ConnectionStats, c *counters) model.TransportStats {
	ts := model.TransportStats{
		Kind: "quic",
		// quic-go (v0.65) builds every connection's congestion controller
		// with NewCubicSender(..., true /* use Reno */): NewReno window
		// growth with a 0.7 backoff; no option chooses another.
		CongestionAlgo:     "reno",
		SmoothedRTTms:      ms(s.SmoothedRTT.Nanoseconds()),
		RTTVarms:           ms(s.MeanDeviation.Nanoseconds()),
		MinRTTms:           ms(s.MinRTT.Nanoseconds()),
		CwndBytes:          int64(s.CongestionWindow),
		PacketsSent:        int64(s.PacketsSent),
		PacketsLost:        int64(s.PacketsLost),
		BytesRetransmitted: int64(s.BytesLost),
	}
	if c == nil {
		// Untraced: every packet declared lost had its frames sent again;
		// the event-only counts were not measured.
		ts.Retransmits = int64(s.PacketsLost)
		ts.PTOCount, ts.CongestionEvents, ts.CongestionStateChanges = model.NotMeasured, model.NotMeasured, model.NotMeasured
	} else {
		ts.Retransmits = c.lost.Load()
		ts.PTOCount = c.ptos.Load()
		ts.CongestionEvents = c.recoveries.Load()
		// quic-go announces the initial state (slow start) when the
		// connection's congestion controller is created: not a change.
		ts.CongestionStateChanges = max(c.stateChange.Load()-1, 0)
	}
	return ts
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

package capture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

// Source is what a Session captures: the two directions of a forwarder
// started with a tap (forward.Forwarder, netns.Testbed), up = 0 and
// down = 1.
type Source interface {
	Tap(i int) *forward.Tap
	Mark(i int) (forward.TapMark, error)
}

// Options configure a Session.
type Options struct {
	// Dir receives a temporary file per segment (the packets of one
	// sample while it runs); it must exist.
	Dir string
	// Budget, shared by the sessions of a run, bounds the bytes of packet
	// blocks written; nil: no limit.
	Budget *Budget
	// Poll is how often the session drains the taps (default 2 ms); Hold
	// is how long a record waits before it is written, so that the two
	// directions' records are written in time order (default 5 ms).
	Poll, Hold time.Duration
	// Clock is the forwarder's clock (default emu.MonotonicClock).
	Clock emu.Clock
	// Count only: segments count the packets and compute the wire timing
	// but write no packet blocks (Segment.WriteFile then writes a capture
	// without packets).
	CountOnly bool
}

// Budget is a run's capture limit: the packet bytes all its captures may
// hold. It is safe for concurrent use.
type Budget struct {
	left      atomic.Int64
	exhausted atomic.Bool
}

// NewBudget returns a budget of limit bytes (limit <= 0: none left).
func NewBudget(limit int64) *Budget {
	b := &Budget{}
	b.left.Store(limit)
	return b
}

// take reserves n bytes; false once the budget cannot hold them (and
// from then on: a capture does not resume with smaller packets).
func (b *Budget) take(n int) bool {
	if b == nil {
		return true
	}
	if b.exhausted.Load() {
		return false
	}
	if b.left.Add(-int64(n)) < 0 {
		b.exhausted.Store(true)
		return false
	}
	return true
}

// Exhausted reports whether the limit was reached.
func (b *Budget) Exhausted() bool { return b != nil && b.exhausted.Load() }

// Left returns the bytes left (negative once exhausted).
func (b *Budget) Left() int64 { return b.left.Load() }

// Session drains a forwarder's taps for as long as it runs, and writes the
// packets of each interval between Begin and End (a sample) to a Segment.
// Packets outside those intervals are read and discarded.
type Session struct {
	src    Source
	taps   [2]*forward.Tap
	opts   Options
	offset int64 // wall clock ns - forwarder clock ns

	mu   sync.Mutex // held while records are processed, and by Begin and End around their marks
	seg  *Segment   // the current or last segment
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// Consumer-only state.
	comment []byte
	buf     []byte
}

// Start starts draining src's taps. Close stops it.
func Start(src Source, opts Options) (*Session, error) {
	s := &Session{src: src, opts: opts, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range s.taps {
		if s.taps[i] = src.Tap(i); s.taps[i] == nil {
			return nil, fmt.Errorf("capture: direction %d of the forwarder has no tap", i)
		}
	}
	if s.opts.Poll <= 0 {
		s.opts.Poll = 2 * time.Millisecond
	}
	if s.opts.Hold <= 0 {
		s.opts.Hold = 5 * time.Millisecond
	}
	if s.opts.Clock == nil {
		s.opts.Clock = emu.MonotonicClock()
	}
	if st, err := os.Stat(opts.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("capture: directory %q: not a directory", opts.Dir)
	}
	s.offset = time.Now().UnixNano() - int64(s.opts.Clock.Now())
	go s.run()
	return s, nil
}

// Close stops draining; a segment not ended is discarded.
func (s *Session) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.seg; g != nil && !g.finished {
		g.abort()
	}
	return nil
}

// Segment is the capture of one interval: its packets in a temporary file
// of Enhanced Packet Blocks (Assemble makes it a pcapng file), with what
// was recorded per direction and the interval's wire timing.
type Segment struct {
	path string
	f    *os.File
	w    *bufio.Writer
	err  error

	// start and end: per direction, the Seq of the first record in and of
	// the first record after; slots: the ring slots written before the end
	// mark (what the consumer must have released before the segment is
	// complete).
	start, end [2]uint64
	slots      [2]uint64
	ended      bool
	finished   bool
	finishedCh chan struct{}
	cut0, cut1 [2]uint64 // the taps' Cut at the marks

	// Verdicts counts the records written per direction and verdict;
	// Marks per direction and mark (bit index of pipeline.Marks).
	Verdicts [2][pipeline.DroppedFlush + 1]uint64
	Marks    [2][8]uint64
	ICMP     [2]uint64 // records of KindICMP, by the interface they are written on
	// Recorded counts the packet blocks written per interface; Cut the
	// records the taps' rings could not keep; Over the records not written
	// because the capture budget was spent.
	Recorded, Cut, Over [2]uint64
	Bytes               int64 // packet block bytes written
	Start, End          time.Time
	wire                *WireTimer
}

// Begin starts a segment at this instant of both directions and returns
// the links' counters at it (exact: forward.Forwarder.Mark). The server
// ports name the flows of the segment's wire timing (none: every flow).
// The previous segment must have ended.
func (s *Session) Begin(serverPorts ...uint16) (up, down emu.Counters, err error) {
	f, err := os.CreateTemp(s.opts.Dir, "segment-*.epb")
	if err != nil {
		return up, down, fmt.Errorf("capture: %w", err)
	}
	g := &Segment{path: f.Name(), f: f, w: bufio.NewWriterSize(f, 1<<16), finishedCh: make(chan struct{}), wire: NewWireTimer(serverPorts...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seg != nil && !s.seg.finished {
		s.seg.abort() // its End failed: nothing will end it
	}
	var ms [2]forward.TapMark
	for i := range ms {
		if ms[i], err = s.src.Mark(i); err != nil {
			g.abort()
			return up, down, fmt.Errorf("capture: %w", err)
		}
		g.start[i], g.cut0[i] = ms[i].Seq, ms[i].Cut
	}
	g.Start = time.Now()
	s.seg = g
	return ms[0].Counters, ms[1].Counters, nil
}

// End ends the current segment at this instant of both directions, waits
// until the session has written every packet before it, and returns the
// segment and the links' counters at the instant. The records of the
// segment count exactly what the difference between these counters and
// Begin's counts, less Cut and Over.
func (s *Session) End() (*Segment, emu.Counters, emu.Counters, error) {
	var ms [2]forward.TapMark
	s.mu.Lock()
	g := s.seg
	if g == nil || g.ended {
		s.mu.Unlock()
		return nil, emu.Counters{}, emu.Counters{}, errors.New("capture: End without Begin")
	}
	for i := range ms {
		var err error
		if ms[i], err = s.src.Mark(i); err != nil {
			s.mu.Unlock()
			return nil, emu.Counters{}, emu.Counters{}, fmt.Errorf("capture: %w", err)
		}
		g.end[i], g.cut1[i] = ms[i].Seq, ms[i].Cut
		g.slots[i] = ms[i].Seq - ms[i].Cut // slots written before the mark
	}
	g.End = time.Now()
	g.ended = true
	s.mu.Unlock()
	s.wake()
	select {
	case <-g.finishedCh:
	case <-s.done:
		return nil, ms[0].Counters, ms[1].Counters, errors.New("capture: session closed")
	}
	if g.err != nil {
		g.Remove()
		return nil, ms[0].Counters, ms[1].Counters, g.err
	}
	return g, ms[0].Counters, ms[1].Counters, nil
}

func (s *Session) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run drains the taps until Close.
func (s *Session) run() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		s.mu.Lock()
		s.drain()
		s.mu.Unlock()
	}
}

// drain processes the records that are due: those older than Hold, and
// all those before an ended segment's end marks, in order of their At
// times across the two directions.
func (s *Session) drain() {
	horizon := s.opts.Clock.Now() - emu.Time(s.opts.Hold)
	g := s.seg
	force := [2]uint64{}
	if g != nil && g.ended && !g.finished {
		force = g.slots
	}
	for {
		var cand [2]*forward.Record
		for i, tap := range s.taps {
			r := tap.Peek()
			if r == nil {
				continue
			}
			released := tap.Released()
			if r.At <= horizon || released < force[i] {
				cand[i] = r
			}
		}
		d := -1
		switch {
		case cand[0] != nil && cand[1] != nil:
			d = 0
			if cand[1].At < cand[0].At {
				d = 1
			}
		case cand[0] != nil:
			d = 0
		case cand[1] != nil:
			d = 1
		}
		if d < 0 {
			break
		}
		s.record(g, d, cand[d])
		s.taps[d].Release()
	}
	if g != nil && g.ended && !g.finished && s.taps[0].Released() >= g.slots[0] && s.taps[1].Released() >= g.slots[1] {
		s.finish(g)
	}
}

// record writes record r of direction d to segment g when it belongs to it.
func (s *Session) record(g *Segment, d int, r *forward.Record) {
	if g == nil || g.finished || r.Seq < g.start[d] || g.ended && r.Seq >= g.end[d] {
		return
	}
	iface := uint32(d)
	if r.Kind == forward.KindICMP {
		iface = uint32(1 - d)
		g.ICMP[iface]++
	} else {
		g.Verdicts[d][r.Verdict]++
		for b := 0; b < 8; b++ {
			if r.Marks&(1<<b) != 0 {
				g.Marks[d][b]++
			}
		}
		g.wire.Add(d, r)
	}
	if g.err != nil || s.opts.CountOnly {
		return
	}
	s.comment = appendComment(s.comment[:0], r)
	s.buf = appendEPB(s.buf[:0], iface, int64(r.At)+s.offset, r.Len, r.Data, s.comment)
	if !s.opts.Budget.take(len(s.buf)) {
		g.Over[iface]++
		return
	}
	if _, err := g.w.Write(s.buf); err != nil {
		g.err = fmt.Errorf("capture: writing %s: %w", g.path, err)
		return
	}
	g.Recorded[iface]++
	g.Bytes += int64(len(s.buf))
}

// finish completes segment g: its file is flushed and closed, and End may
// return it.
func (s *Session) finish(g *Segment) {
	for i := range g.Cut {
		g.Cut[i] = g.cut1[i] - g.cut0[i]
	}
	if err := g.w.Flush(); err != nil && g.err == nil {
		g.err = fmt.Errorf("capture: writing %s: %w", g.path, err)
	}
	if err := g.f.Close(); err != nil && g.err == nil {
		g.err = fmt.Errorf("capture: writing %s: %w", g.path, err)
	}
	g.finished = true
	close(g.finishedCh)
}

// abort discards a segment that will not end.
func (g *Segment) abort() {
	g.f.Close()
	os.Remove(g.path)
	g.finished = true
	close(g.finishedCh)
}

// Wire returns the segment's wire timing.
func (g *Segment) Wire() WireTiming { return g.wire.Result() }

// Missed returns the records of interface i not written: cut by a full
// ring or over the budget.
func (g *Segment) Missed(i int) uint64 { return g.Cut[i] + g.Over[i] }

// Info returns the segment's header information with the given section
// comment, snap length and version.
func (g *Segment) Info(comment string, snap int, version string) Info {
	return Info{Comment: comment, Snap: snap, Version: version, Recorded: g.Recorded,
		Missed: [2]uint64{g.Missed(0), g.Missed(1)}, Start: g.Start, End: g.End}
}

// WriteFile writes the segment as a pcapng file at path (created or
// truncated), with keys as its Decryption Secrets Block.
func (g *Segment) WriteFile(path string, info Info, keys []byte) error {
	body, err := os.Open(g.path)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer body.Close()
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err := Assemble(out, info, keys, body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Remove deletes the segment's temporary file.
func (g *Segment) Remove() { os.Remove(g.path) }

// Path returns the segment's temporary file of packet blocks.
func (g *Segment) Path() string { return filepath.Clean(g.path) }

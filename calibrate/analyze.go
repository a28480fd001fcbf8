package calibrate

import (
	"fmt"
	"math"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
)

func ptr(v float64) *float64 { return &v }

// judge sets f's status: ok when |measured - configured| <= tol.
func judge(f Figure, tol float64) Figure {
	f.Status = StatusOK
	if f.Configured == nil || math.Abs(f.Measured-*f.Configured) > tol {
		f.Status = StatusFail
	}
	return f
}

// delayTol formats a delay tolerance.
func delayTol(d time.Duration) string { return fmt.Sprintf("±%d us", d.Microseconds()) }

// probeSample is one phase's probes of one direction: what was sent, what
// arrived, and what the model says should have arrived.
type probeSample struct {
	link  spec.Link
	sendT []int64 // per probe; 0: not sent
	col   *collector
	model *modelResult // nil when the replay failed

	sent, received, dups int
	owd, modelOWD        []float64 // ns, over received probes / model-delivered probes
	early                int       // received probes with a one-way delay under half the base delay
	aligned              bool      // the link and the model delivered the same copies of the same probes
	errs                 []float64 // measured - model one-way delay per probe delivered by both (ns)
}

func newProbeSample(l spec.Link, seed uint64, col *collector, recs []sendRec) (*probeSample, error) {
	n := len(col.probes)
	s := &probeSample{link: l, sendT: sendTimes(recs, n), col: col}
	m, err := replay(l, seed, recs, n)
	if err != nil {
		return nil, err
	}
	s.model = m
	s.aligned = true
	half := float64(l.Delay) / 2
	for seq := range n {
		t := s.sendT[seq]
		if t == 0 {
			continue
		}
		s.sent++
		p := col.probes[seq]
		if p.copies > 0 {
			s.received++
			s.dups += int(p.copies) - 1
			d := float64(p.rx - t)
			s.owd = append(s.owd, d)
			if d < half {
				s.early++
			}
		}
		if m.copies[seq] > 0 {
			s.modelOWD = append(s.modelOWD, float64(m.first[seq]-t))
		}
		if p.copies != m.copies[seq] {
			s.aligned = false
		}
		if p.copies > 0 && m.copies[seq] > 0 {
			s.errs = append(s.errs, float64(p.rx-m.first[seq]))
		}
	}
	return s, nil
}

// ipdv returns the mean absolute one-way delay difference of consecutive
// probes (RFC 5481's IPDV with consecutive selection), for the model and the
// measurement, each over the pairs it delivered. Unlike the standard
// deviation, one stalled millisecond among thousands of probes barely moves
// it.
func (s *probeSample) ipdv() (model, measured float64) {
	var ms, cs float64
	var mn, cn int
	for seq := 1; seq < len(s.sendT); seq++ {
		a, b := s.sendT[seq-1], s.sendT[seq]
		if a == 0 || b == 0 {
			continue
		}
		if s.model.copies[seq-1] > 0 && s.model.copies[seq] > 0 {
			ms += math.Abs(float64((s.model.first[seq] - b) - (s.model.first[seq-1] - a)))
			mn++
		}
		p, q := s.col.probes[seq-1], s.col.probes[seq]
		if p.copies > 0 && q.copies > 0 {
			cs += math.Abs(float64((q.rx - b) - (p.rx - a)))
			cn++
		}
	}
	if mn > 0 {
		model = ms / float64(mn)
	}
	if cn > 0 {
		measured = cs / float64(cn)
	}
	return model, measured
}

// analyzeProbes turns one direction's probe phase into figures.
func (r *run) analyzeProbes(dir int, label string, idle bool, col *collector, recs []sendRec) error {
	l := r.links[dir]
	s, err := newProbeSample(l, dirSeed(r.cfg.Seed, dir), col, recs)
	if err != nil {
		return fmt.Errorf("%s %s: %w", dirNames[dir], label, err)
	}
	r.samples = append(r.samples, keptSample{dir: dir, idle: idle, s: s})
	dn := dirNames[dir]
	add := func(f Figure) {
		f.Direction = dn
		r.rep.Figures = append(r.rep.Figures, f)
	}
	if s.received == 0 {
		r.warn("%s %s: no probe arrived (%d sent)", dn, label, s.sent)
		return nil
	}
	if col.noStamp > 0 {
		r.warn("%s %s: %d datagrams arrived without a kernel timestamp and were not counted", dn, label, col.noStamp)
	}
	if col.stray > 0 {
		r.warn("%s %s: %d datagrams from another phase arrived (ignored)", dn, label, col.stray)
	}
	meas, model := summarize(s.owd), summarize(s.modelOWD)
	ms := func(ns float64) float64 { return ns / 1e6 }
	add(judge(Figure{Name: "delay p50 " + label, Unit: "ms", Configured: ptr(ms(model.p50)), Measured: ms(meas.p50),
		Tolerance: delayTol(TolDelayP50)}, ms(float64(TolDelayP50))))
	add(judge(Figure{Name: "delay p99 " + label, Unit: "ms", Configured: ptr(ms(model.p99)), Measured: ms(meas.p99),
		Tolerance: delayTol(TolDelayP99)}, ms(float64(TolDelayP99))))
	add(Figure{Name: "delay max " + label, Unit: "ms", Configured: ptr(ms(model.max)), Measured: ms(meas.max),
		Tolerance: "-", Status: StatusInfo})
	mIPDV, cIPDV := s.ipdv()
	add(judge(Figure{Name: "jitter (mean IPDV) " + label, Unit: "ms", Configured: ptr(ms(mIPDV)), Measured: ms(cIPDV),
		Tolerance: delayTol(TolJitter), Note: "mean |delay difference| of consecutive probes"}, ms(float64(TolJitter))))
	add(Figure{Name: "delay stddev " + label, Unit: "ms", Configured: ptr(ms(model.std)), Measured: ms(meas.std),
		Tolerance: "-", Status: StatusInfo})
	if s.aligned && len(s.errs) > 0 {
		e := summarize(s.errs)
		add(Figure{Name: "per-packet error p50 " + label, Unit: "us", Measured: e.p50 / 1e3, Tolerance: "-", Status: StatusInfo,
			Note: "measured - model delay of each probe"})
		add(Figure{Name: "per-packet error p99 " + label, Unit: "us", Measured: e.p99 / 1e3, Tolerance: "-", Status: StatusInfo})
	} else if !s.aligned && l.Trace == "" && l.On == 0 && idle {
		r.warn("%s %s: the link and the seeded model did not deliver the same probes (%d vs %d arrived): the same seed should give the same decisions",
			dn, label, s.received, s.model.delivered)
	}
	if !idle {
		return nil
	}
	r.lossFigures(dir, s, add)
	r.reorderFigures(s, add)
	return nil
}

// proportion is a figure for k events in n trials against probability p:
// the measured proportion with its 95% Clopper-Pearson interval. When judged
// (independent trials), it fails only if p lies outside the 99.9% interval:
// every run is a sample of its seed's random stream, and a correct link
// leaves p outside the 95% interval for one seed in twenty (of 400 seeds,
// 22 did so with loss 5% over 20,000 packets), while an emulator applying
// the wrong probability misses by far more. Between the two the figure is
// ok with a note.
func proportion(name string, p float64, k, n int, judged bool) Figure {
	lo, hi := clopperPearson(k, n, 0.05)
	f := Figure{Name: name, Unit: "%", Configured: ptr(100 * p), Measured: 100 * float64(k) / float64(n),
		Low: ptr(100 * lo), High: ptr(100 * hi), Tolerance: "judged at 99.9% CI (95% CI shown)", Status: StatusOK}
	if !judged {
		f.Status, f.Tolerance = StatusInfo, "-"
		return f
	}
	const eps = 1e-12
	if p < lo-eps || p > hi+eps {
		wlo, whi := clopperPearson(k, n, 0.001)
		if p < wlo-eps || p > whi+eps {
			f.Status = StatusFail
			f.Note = fmt.Sprintf("outside the 99.9%% interval [%.3f%%, %.3f%%]", 100*wlo, 100*whi)
		} else {
			f.Note = "outside the 95% interval but inside the 99.9% one: this seed's draws (1 seed in 20 does this)"
		}
	}
	return f
}

func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// lossFigures: loss, lost vs the model, duplicates.
func (r *run) lossFigures(dir int, s *probeSample, add func(Figure)) {
	l := s.link
	lossP, indepLoss := l.Loss.LongRun()
	dupP, corP := l.Duplicate/100, l.Corrupt/100
	independent := indepLoss && (dupP == 0 || l.DuplicateCorr == 0) && (corP == 0 || l.CorruptCorr == 0) && l.On == 0
	lost := s.sent - s.received
	f := proportion("loss", undeliveredProb(lossP, dupP, corP), lost, s.sent, independent)
	f.Note = joinNote(fmt.Sprintf("%d of %d probes", lost, s.sent), f.Note)
	if corP > 0 {
		f.Note += "; corrupted probes count as lost (the receiver's checksum drops them)"
	}
	if !independent {
		f.Note += "; correlated or bursty losses: no binomial interval applies"
	}
	add(f)
	if s.model != nil {
		modelLost := s.sent - s.model.delivered
		g := Figure{Name: "lost probes vs seeded model", Unit: "packets", Configured: ptr(float64(modelLost)),
			Measured: float64(lost), Tolerance: "exact", Note: fmt.Sprintf("seed %d", dirSeed(r.cfg.Seed, dir))}
		if l.Trace != "" || l.On > 0 {
			g.Status, g.Tolerance = StatusInfo, "-"
			g.Note += "; drops by trace or blackout depend on timing"
		} else {
			g = judge(g, 0)
		}
		add(g)
	}
	if dupP > 0 || s.dups > 0 {
		f := proportion("duplicates", duplicateProb(lossP, dupP, corP), s.dups, s.sent, independent)
		f.Note = joinNote(fmt.Sprintf("%d extra copies", s.dups), f.Note)
		add(f)
	}
}

// reorderFigures: late probes vs the model, early probes vs reorder.
func (r *run) reorderFigures(s *probeSample, add func(Figure)) {
	l := s.link
	if s.model != nil && s.model.delivered > 0 {
		want := float64(s.model.late) / float64(s.model.delivered)
		got := float64(s.col.late) / float64(s.received)
		tol := max(TolReorderAbs, TolReorderRel*want)
		add(judge(Figure{Name: "reorder (late probes)", Unit: "%", Configured: ptr(100 * want), Measured: 100 * got,
			Tolerance: fmt.Sprintf("±%s pp", trimFloat(100*tol)), Note: fmt.Sprintf("%d late", s.col.late)}, 100*tol))
	}
	// Early packets are recognizable when jitter cannot bring a normal
	// packet under half the base delay.
	if l.Reorder > 0 && l.Delay >= 2*time.Millisecond && l.MaxDelay()-l.Delay < l.Delay/2 {
		f := proportion("sent early (reorder)", earlyFraction(l.Reorder/100, l.Gap), s.early, s.received, l.ReorderCorr == 0)
		f.Note = joinNote(fmt.Sprintf("%d probes under half the base delay", s.early), f.Note)
		add(f)
	}
}

// rates measures the delivered rate of each direction with a rate or trace.
func (r *run) rates() error {
	for dir := range 2 {
		l := r.links[dir]
		bps := linkBps(l)
		if bps == 0 {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
			return err
		}
		ph := r.nextPhase()
		const size = bulkPayload + ipUDPOverhead
		// IP bit/s the link delivers intact when saturated: corrupted
		// packets use the link but the receiver's checksum drops them.
		want := bps * size / wireBytes(l, size) * (1 - l.Corrupt/100)
		lossP, _ := l.Loss.LongRun()
		send := rateOverdrive * want / max(1-lossP, 0.05)
		if l.Trace != "" {
			send = 1.5 * want / max(1-lossP, 0.05)
		}
		r.progress("rate phase, %s: %s of UDP for %v", dirNames[dir], fmtBps(send), r.cfg.Duration)
		off0 := realtimeOffset()
		col := newCollector(ph, 0, off0)
		cols := []*collector{col}
		before := r.outsideSnapshot()
		stop := collect([]*receiver{r.rx[dir]}, cols)
		fl := newBulkFlow(r.bulkTx[dir], kindBulk, ph, send, r.cfg.Duration, nil)
		cpu0, t0 := r.tb.ForwarderCPU(), time.Now()
		r.runFlows([]*flow{fl})
		cpu := 100 * float64(r.tb.ForwarderCPU()-cpu0) / float64(time.Since(t0))
		var c emu.Counters
		if up, down := r.tb.Counters(); dir == dirUp {
			c = up
		} else {
			c = down
		}
		// The link stays busy while its queue drains; what arrives by
		// then is enough (the rate is measured between first and last
		// arrival), the rest is flushed by the next phase.
		time.Sleep(200 * time.Millisecond)
		if err := stop(); err != nil {
			return fmt.Errorf("rate phase receiver: %w", err)
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		r.checkClock("rate phase", off0)
		r.checkOutside("rate phase", before, dir)
		if fl.errs > 0 {
			r.warn("rate phase, %s: %d packets could not be sent: %v", dirNames[dir], fl.errs, fl.lastErr)
		}
		if col.bulkPackets < 2 || col.bulkLast <= col.bulkFirst {
			r.warn("rate phase, %s: only %d packets arrived", dirNames[dir], col.bulkPackets)
			continue
		}
		got := float64(col.bulkBytes-col.bulkFirstSize) * 8 / (float64(col.bulkLast-col.bulkFirst) / 1e9)
		f := Figure{Direction: dirNames[dir], Name: "delivered rate", Unit: "Mbit/s", Configured: ptr(want / 1e6), Measured: got / 1e6,
			Tolerance: fmt.Sprintf("±%s%%", trimFloat(100*TolRate)),
			Note: fmt.Sprintf("%d packets of %d bytes arrived; offered %s, queue dropped %d; emulator CPU %.0f%% of a core",
				col.bulkPackets, size, fmtBps(float64(c.BytesIn)*8/r.cfg.Duration.Seconds()), c.DropQueue, cpu)}
		fu, fd := r.tb.ForwarderStats()
		if n := [2]forward.Stats{fu, fd}[dir].Shed - before.fwd[dir].Shed; n > 0 { // only SCHED_FIFO threads shed
			f.Note += fmt.Sprintf("; busy, the thread left SCHED_FIFO %d times (see package forward)", n)
		}
		switch {
		case l.Trace != "" || l.On > 0:
			f.Status, f.Tolerance = StatusInfo, "-"
			f.Note += "; trace mean or blackouts: not judged"
		default:
			f = judge(f, TolRate*want/1e6)
		}
		r.rep.Figures = append(r.rep.Figures, f)
	}
	return nil
}

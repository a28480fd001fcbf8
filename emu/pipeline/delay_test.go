package pipeline

import (
	"math"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

func TestDelayExact(t *testing.T) {
	p, got := deliverN(t, "delay 25ms", every(100, 0, 137*us, 1000), true, 100)
	for i, d := range got {
		want := emu.Time(i)*137*us + 25*ms
		if d.id != uint64(i) || d.at != want {
			t.Fatalf("delivery %d: packet %d at %d, want packet %d at %d", i, d.id, d.at, i, want)
		}
	}
	c := p.Counters()
	if c.PacketsIn != 100 || c.PacketsOut != 100 || c.BytesIn != 100_000 || c.BytesOut != 100_000 ||
		c.QueueDelayMaxNs != 0 || c.QueueDelaySumNs != 0 || c.Reordered != 0 {
		t.Fatalf("counters %+v", c)
	}
	checkInvariant(t, p)
}

func TestNoImpairmentPassesThrough(t *testing.T) {
	p, pool := build(t, "", 1)
	pkt := mkpkt(t, pool, 7, 100)
	p.Enqueue(5, pkt)
	if d, ok := p.NextDeadline(); !ok || d != 5 {
		t.Fatalf("NextDeadline = %d %v", d, ok)
	}
	if got := p.Dequeue(5); got != pkt {
		t.Fatalf("Dequeue returned %v", got)
	}
	if _, ok := p.NextDeadline(); ok {
		t.Fatal("empty pipeline has a deadline")
	}
}

// delays returns the one-way delay of each delivered packet, by id.
func delays(arr []arrival, got []delivery) map[uint64]emu.Time {
	m := map[uint64]emu.Time{}
	for _, d := range got {
		m[d.id] = d.at - arr[d.id].at
	}
	return m
}

func TestJitterReordersWithoutRate(t *testing.T) {
	p, pool := build(t, "delay 10ms 5ms", 3)
	arr := every(2000, 0, 100*us, 200)
	got := drive(t, p, pool, arr, true)
	if len(got) != 2000 {
		t.Fatalf("%d delivered", len(got))
	}
	var sum float64
	for id, d := range delays(arr, got) {
		if d < 5*ms || d >= 15*ms {
			t.Fatalf("packet %d delayed %d, outside [5ms, 15ms)", id, d)
		}
		sum += float64(d)
	}
	if mean := sum / 2000; math.Abs(mean-float64(10*ms)) > float64(200*us) {
		t.Fatalf("mean delay %.0f ns, want 10ms ± 0.2ms", mean)
	}
	if c := p.Counters(); c.Reordered == 0 || c.QueueDelayMaxNs != 0 {
		t.Fatalf("jitter without rate: Reordered %d (want > 0), QueueDelayMax %d (want 0)", c.Reordered, c.QueueDelayMaxNs)
	}
}

func TestJitterKeepsOrderBehindRate(t *testing.T) {
	p, pool := build(t, "delay 10ms 5ms rate 100mbit", 3)
	got := drive(t, p, pool, every(2000, 0, 100*us, 200), true)
	if len(got) != 2000 {
		t.Fatalf("%d delivered", len(got))
	}
	for i := range got {
		if got[i].id != uint64(i) {
			t.Fatalf("delivery %d is packet %d: jitter reordered behind a rate", i, got[i].id)
		}
	}
	if c := p.Counters(); c.Reordered != 0 || c.QueueDelayMaxNs == 0 {
		t.Fatalf("Reordered %d (want 0), QueueDelayMax %d (want > 0: packets held behind late ones)", c.Reordered, c.QueueDelayMaxNs)
	}
}

// samples draws n delay samples straight from a delay stage.
func samples(t *testing.T, s string, n int) []float64 {
	t.Helper()
	l, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	d := newDelayStage(l, 42)
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(d.sample(d.s.u64(), true))
	}
	return out
}

func moments(x []float64) (mean, sd, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range x {
		mean += v
		lo, hi = min(lo, v), max(hi, v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x))), lo, hi
}

func lag1(x []float64) float64 {
	mean, sd, _, _ := moments(x)
	var c float64
	for i := 1; i < len(x); i++ {
		c += (x[i] - mean) * (x[i-1] - mean)
	}
	return c / float64(len(x)-1) / (sd * sd)
}

func TestJitterDistributions(t *testing.T) {
	const n = 200_000
	const base, j = 50e6, 10e6 // ns
	tests := []struct {
		spec     string
		mean     float64 // expected mean
		sd       float64 // expected standard deviation (0: not checked)
		min, max float64 // bounds
	}{
		{"delay 50ms 10ms", base, j / math.Sqrt(3), base - j, base + j},
		{"delay 50ms 10ms distribution normal", base, j, base - 4*j, base + 4*j},
		// Pareto (alpha 3, netem's table): mean 0 before its tail is cut at
		// +4 jitter, which lowers the mean by 3.3% of the jitter:
		// E[min(U^-1/3, 4.5)] = 1.5(1-c^(2/3)) + 4.5c with c = 4.5^-3.
		{"delay 50ms 10ms distribution pareto", base - 0.0329*j, 0, base - 2*j/3, base + 4*j},
		{"delay 50ms 10ms distribution paretonormal", base - 0.0329*j, 0, base - 4*j, base + 4*j},
	}
	for _, tt := range tests {
		x := samples(t, tt.spec, n)
		mean, sd, lo, hi := moments(x)
		if math.Abs(mean-tt.mean) > 0.015*j {
			t.Errorf("%s: mean %.0f, want %.0f ± 1.5%% of jitter", tt.spec, mean, tt.mean)
		}
		if tt.sd > 0 && math.Abs(sd-tt.sd) > 0.02*tt.sd {
			t.Errorf("%s: sd %.0f, want %.0f ± 2%%", tt.spec, sd, tt.sd)
		}
		if lo < tt.min-1 || hi > tt.max+1 {
			t.Errorf("%s: samples in [%.0f, %.0f], want within [%.0f, %.0f]", tt.spec, lo, hi, tt.min, tt.max)
		}
		if r := lag1(x); math.Abs(r) > 0.01 {
			t.Errorf("%s: lag-1 correlation %.3f without correlation", tt.spec, r)
		}
	}
	// Pareto is skewed right: its median is below its mean.
	x := samples(t, "delay 50ms 10ms distribution pareto", n)
	below := 0
	for _, v := range x {
		if v < base {
			below++
		}
	}
	if frac := float64(below) / n; frac < 0.55 {
		t.Errorf("pareto: %.2f of samples below the mean, want a right-skewed majority", frac)
	}
}

func TestJitterCorrelation(t *testing.T) {
	const n = 200_000
	for _, tt := range []struct {
		spec string
		rho  float64
	}{
		{"delay 50ms 10ms 75% distribution normal", 0.75},
		{"delay 50ms 10ms 50%", 0.5},
		{"delay 50ms 10ms 90% distribution pareto", 0.9},
	} {
		x := samples(t, tt.spec, n)
		// The Gaussian copula keeps the marginal; the sample correlation of
		// the mapped values is close to rho (a little below it for
		// non-normal marginals).
		if r := lag1(x); r < tt.rho-0.08 || r > tt.rho+0.02 {
			t.Errorf("%s: lag-1 correlation %.3f, want about %.2f", tt.spec, r, tt.rho)
		}
		// Unlike netem's correlation, which narrows the distribution, the
		// spread is that of the uncorrelated distribution.
		if sd, plain := sdOf(x), sdOf(samples(t, stripCorr(tt.spec), n)); math.Abs(sd-plain) > 0.05*plain {
			t.Errorf("%s: sd %.0f with correlation, %.0f without", tt.spec, sd, plain)
		}
	}
}

func sdOf(x []float64) float64 { _, s, _, _ := moments(x); return s }

// stripCorr removes the correlation from "delay D J C% ..." specs.
func stripCorr(s string) string {
	l, _ := spec.Parse(s)
	l.DelayCorr = 0
	return l.String()
}

func TestNegativeDelaysAreClampedToZero(t *testing.T) {
	x := samples(t, "delay 1ms 10ms distribution normal", 50_000)
	_, _, lo, _ := moments(x)
	if lo != 0 {
		t.Fatalf("smallest delay %.0f, want exactly 0 (clamped)", lo)
	}
}

package calibrate

import (
	"math"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/emu/spec"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestSummarize(t *testing.T) {
	d := summarize([]float64{5, 1, 4, 2, 3})
	if d.n != 5 || d.p50 != 3 || !near(d.p99, 4.96, 1e-12) || d.max != 5 || d.mean != 3 || !near(d.std, math.Sqrt(2.5), 1e-12) {
		t.Fatalf("summarize = %+v", d)
	}
	if d := summarize(nil); d.n != 0 || d.p99 != 0 {
		t.Fatalf("empty sample: %+v", d)
	}
	if d := summarize([]float64{7}); d.p50 != 7 || d.p99 != 7 || d.std != 0 {
		t.Fatalf("one value: %+v", d)
	}
}

func TestClopperPearson(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		alpha  float64
		lo, hi float64
	}{
		// Closed forms: k=0 gives hi = 1-(alpha/2)^(1/n); k=n gives lo = (alpha/2)^(1/n).
		{0, 10, 0.05, 0, 1 - math.Pow(0.025, 0.1)},
		{10, 10, 0.05, math.Pow(0.025, 0.1), 1},
		// Published value (e.g. R's binom.test(5, 10)): [0.1870860, 0.8129140].
		{5, 10, 0.05, 0.1870860, 0.8129140},
		// scipy.stats.beta.ppf(0.025, 20, 981), beta.ppf(0.975, 21, 980).
		{20, 1000, 0.05, 0.0122583, 0.0307200},
	} {
		lo, hi := clopperPearson(c.k, c.n, c.alpha)
		if !near(lo, c.lo, 1e-5) || !near(hi, c.hi, 1e-5) {
			t.Errorf("clopperPearson(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	lo95, hi95 := clopperPearson(50, 1000, 0.05)
	lo999, hi999 := clopperPearson(50, 1000, 0.001)
	if !(lo999 < lo95 && hi999 > hi95) {
		t.Errorf("99.9%% interval [%v, %v] does not contain the 95%% one [%v, %v]", lo999, hi999, lo95, hi95)
	}
}

func TestDeliveryProbabilities(t *testing.T) {
	if got := undeliveredProb(0.1, 0, 0); !near(got, 0.1, 1e-15) {
		t.Errorf("loss only: %v", got)
	}
	if got := undeliveredProb(0.1, 1, 0); got != 0 {
		t.Errorf("duplicate 100%% and loss 10%%: a lost duplicated packet still sends one copy, got %v", got)
	}
	if got := undeliveredProb(0, 0, 0.2); !near(got, 0.2, 1e-15) {
		t.Errorf("corrupt only: %v", got)
	}
	// Duplicated (50%): not lost, both copies corrupt; or lost, its one copy corrupt.
	if got, want := undeliveredProb(0.1, 0.5, 0.2), 0.5*(0.1+0.9*0.2)+0.5*(0.1*0.2+0.9*0.04); !near(got, want, 1e-15) {
		t.Errorf("mixed: %v, want %v", got, want)
	}
	if got := duplicateProb(0.1, 0.5, 0); !near(got, 0.45, 1e-15) {
		t.Errorf("duplicateProb = %v", got)
	}
	for _, c := range []struct {
		r    float64
		gap  uint32
		want float64
	}{{0.25, 1, 0.25}, {0.25, 0, 0.25}, {1, 5, 0.2}, {0.5, 3, 0.25}, {0, 3, 0}} {
		if got := earlyFraction(c.r, c.gap); !near(got, c.want, 1e-15) {
			t.Errorf("earlyFraction(%v, %d) = %v, want %v", c.r, c.gap, got, c.want)
		}
	}
}

func TestWireBytes(t *testing.T) {
	for _, c := range []struct {
		spec string
		want float64
	}{
		{"rate 10mbit", 1500},
		{"rate 10mbit 20", 1520},
		{"rate 2mbit 0 48 5", 32 * 53}, // ATM: 1500 bytes in 32 cells of 48+5
	} {
		l, err := spec.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := wireBytes(l, 1500); got != c.want {
			t.Errorf("%q: wireBytes(1500) = %v, want %v", c.spec, got, c.want)
		}
	}
}

func TestProportionJudgement(t *testing.T) {
	// 100 of 2000 = 5%: 5% is inside.
	if f := proportion("loss", 0.05, 100, 2000, true); f.Status != StatusOK || f.Note != "" || *f.Low > 5 || *f.High < 5 {
		t.Errorf("inside the 95%% interval: %+v", f)
	}
	// 1066 of 20000 (seed 1's draws for loss 5%): outside 95%, inside 99.9%.
	f := proportion("loss", 0.05, 1066, 20000, true)
	if f.Status != StatusOK || !strings.Contains(f.Note, "99.9%") {
		t.Errorf("between the intervals: %+v", f)
	}
	// 1400 of 20000 = 7% against 5%: a wrong probability.
	if f := proportion("loss", 0.05, 1400, 20000, true); f.Status != StatusFail {
		t.Errorf("far outside: %+v", f)
	}
	if f := proportion("loss", 0.05, 1400, 20000, false); f.Status != StatusInfo {
		t.Errorf("not judged: %+v", f)
	}
}

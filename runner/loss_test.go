package runner

import (
	"strings"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"gonum.org/v1/gonum/stat/distuv"
)

func TestBinomialInterval(t *testing.T) {
	for _, c := range []struct {
		n uint64
		p float64
	}{{100, 0.01}, {1000, 0.02}, {10000, 0.01}, {123457, 0.3}, {500, 0.99}} {
		lo, hi := binomialInterval(c.n, c.p, lossCheckAlpha)
		b := distuv.Binomial{N: float64(c.n), P: c.p}
		a := lossCheckAlpha / 2
		// lo and hi are the smallest counts whose CDF reaches a and 1-a
		if b.CDF(float64(lo)) < a || (lo > 0 && b.CDF(float64(lo-1)) >= a) {
			t.Errorf("n %d p %g: lo %d is not the %g quantile", c.n, c.p, lo, a)
		}
		if b.CDF(float64(hi)) < 1-a || (hi > 0 && b.CDF(float64(hi-1)) >= 1-a) {
			t.Errorf("n %d p %g: hi %d is not the %g quantile", c.n, c.p, hi, 1-a)
		}
		if mean := float64(c.n) * c.p; float64(lo) > mean || float64(hi) < mean {
			t.Errorf("n %d p %g: [%d, %d] does not contain the mean %g", c.n, c.p, lo, hi, mean)
		}
	}
	if lo, hi := binomialInterval(1000, 0, lossCheckAlpha); lo != 0 || hi != 0 {
		t.Errorf("p 0: [%d, %d]", lo, hi)
	}
	if lo, hi := binomialInterval(1000, 1, lossCheckAlpha); lo != 1000 || hi != 1000 {
		t.Errorf("p 1: [%d, %d]", lo, hi)
	}
}

func TestLossAnomaly(t *testing.T) {
	random := func(pct, corr float64) spec.Loss {
		return spec.Loss{Model: spec.LossRandom, Percent: pct, Correlation: corr}
	}
	lo, hi := binomialInterval(10000, 0.01, lossCheckAlpha)
	for _, c := range []struct {
		name string
		loss spec.Loss
		k    emu.Counters
		want string // substring of the warning; "" for none
	}{
		{"as configured", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: 100}, ""},
		{"upper bound", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: hi}, ""},
		{"above the interval", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: hi + 1}, "up: the loss model dropped"},
		{"lower bound", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: lo}, ""},
		{"below the interval", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: lo - 1}, "outside the 99.9% binomial interval"},
		{"three times the loss", random(1, 0), emu.Counters{PacketsIn: 10000, DropLoss: 300}, "300 of 10000 packets (3.00%)"},
		{"too few packets", random(1, 0), emu.Counters{PacketsIn: lossCheckMinPackets - 1, DropLoss: 50}, ""},
		{"loss without a loss model", spec.Loss{}, emu.Counters{PacketsIn: 1000, DropLoss: 1}, "configured loss 0%"},
		{"no loss", spec.Loss{}, emu.Counters{PacketsIn: 1000}, ""},
		// losses are decided for packets outside a blackout only
		{"blackout not counted", random(1, 0), emu.Counters{PacketsIn: 20000, DropOff: 10000, DropLoss: 100}, ""},
		// bursty models vary more than a binomial: not checked
		{"correlated", random(1, 50), emu.Counters{PacketsIn: 10000, DropLoss: 400}, ""},
		{"gemodel with bursts", spec.Loss{Model: spec.LossGemodel, P: 1, R: 30, BadLoss: 100}, emu.Counters{PacketsIn: 10000, DropLoss: 1000}, ""},
		{"memoryless gemodel", spec.Loss{Model: spec.LossGemodel, P: 1, R: 30, GoodLoss: 2, BadLoss: 2}, emu.Counters{PacketsIn: 10000, DropLoss: 1000}, "configured loss 2%"},
	} {
		got := lossAnomaly("up", c.loss, c.k)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestLateDepartures: a sample whose emulator took more than 1% of its
// packets (both directions together) out of the link later than the
// threshold is flagged with the counts; 1% or less, or none late, is not.
func TestLateDepartures(t *testing.T) {
	for _, c := range []struct {
		name     string
		up, down emu.Counters
		want     string
	}{
		{"none late", emu.Counters{PacketsOut: 500}, emu.Counters{PacketsOut: 9500}, ""},
		{"1% late", emu.Counters{PacketsOut: 500, LateOut: 50}, emu.Counters{PacketsOut: 9500, LateOut: 50}, ""},
		{"over 1%", emu.Counters{PacketsOut: 500}, emu.Counters{PacketsOut: 9500, LateOut: 101}, "emulator late: 101 of 10000 packets (1.0%) left the link more than 150 us after their departure time"},
		{"one of a few", emu.Counters{PacketsOut: 5, LateOut: 1}, emu.Counters{PacketsOut: 5}, "1 of 10 packets (10.0%)"},
		{"no packets", emu.Counters{}, emu.Counters{}, ""},
	} {
		got := lateDepartures(c.up, c.down)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

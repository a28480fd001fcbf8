package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDescribeMatchesNumPy(t *testing.T) {
	// np.percentile(v, [5, 25, 50, 75, 95, 99]) and the t interval of the
	// mean; see the script at the top of tests_test.go.
	v := []float64{12.1, 13.4, 11.8, 15.2, 14.0, 12.9, 13.7, 16.1, 9.5, 21.0}
	orig := slices.Clone(v)
	s := Describe(v, Config{}, 7)
	if !slices.Equal(v, orig) {
		t.Fatal("Describe modified its input")
	}
	if s.N != 10 || s.Min != 9.5 || s.Max != 21.0 {
		t.Errorf("n/min/max = %d/%v/%v", s.N, s.Min, s.Max)
	}
	near(t, "p5", s.P5, 10.535, 1e-12)
	near(t, "p25", s.P25, 12.3, 1e-12)
	near(t, "median", s.Median, 13.55, 1e-12)
	near(t, "p75", s.P75, 14.899999999999999, 1e-12)
	near(t, "p95", s.P95, 18.794999999999995, 1e-12)
	near(t, "p99", s.P99, 20.559, 1e-12)
	near(t, "mean", s.Mean, 13.969999999999999, 1e-12)
	near(t, "sd", s.SD, 3.076812925378756, 1e-12)
	near(t, "cv", s.CV, 3.076812925378756/13.97, 1e-12)
	near(t, "mean CI lo", s.MeanCI.Lo, 11.768980625450503, 1e-10)
	near(t, "mean CI hi", s.MeanCI.Hi, 16.171019374549495, 1e-10)
	if !s.MedianCI.Contains(s.Median) || s.MedianCI.Lo < s.Min || s.MedianCI.Hi > s.Max {
		t.Errorf("median CI %+v does not contain the median %v within [min, max]", s.MedianCI, s.Median)
	}
}

func TestDescribeSmall(t *testing.T) {
	s := Describe(nil, Config{}, 0)
	if s.N != 0 || !math.IsNaN(s.Median) || s.MeanCI.Valid() || s.MedianCI.Valid() {
		t.Errorf("empty: %+v", s)
	}
	s = Describe([]float64{4}, Config{}, 0)
	if s.Mean != 4 || s.Median != 4 || s.MeanCI.Valid() || s.MedianCI != (Interval{4, 4}) || !math.IsNaN(s.SD) {
		t.Errorf("one value: %+v", s)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5 (definition 7)", m)
	}
}

func TestBootstrapDeterministic(t *testing.T) {
	x := make([]float64, 101)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range x {
		x[i] = r.ExpFloat64() * 10
	}
	slices.Sort(x)
	a := BootstrapMedianCI(x, 0.95, 1000, 42, StreamOf("cell"))
	b := BootstrapMedianCI(x, 0.95, 1000, 42, StreamOf("cell"))
	if a != b {
		t.Fatalf("same seed gave %+v and %+v", a, b)
	}
	c := BootstrapMedianCI(x, 0.95, 1000, 43, StreamOf("cell"))
	d := BootstrapMedianCI(x, 0.95, 1000, 42, StreamOf("other"))
	if c == a && d == a {
		t.Errorf("other seeds and streams gave the same interval %+v", a)
	}
	m := QuantileSorted(x, 0.5)
	if !a.Contains(m) || a.Hi <= a.Lo {
		t.Errorf("interval %+v does not contain the median %v", a, m)
	}
	narrow := BootstrapMedianCI(x, 0.5, 1000, 42, StreamOf("cell"))
	if narrow.Hi-narrow.Lo > a.Hi-a.Lo {
		t.Errorf("50%% interval %+v wider than 95%% interval %+v", narrow, a)
	}
}

// TestBootstrapCountingEqualsNaive checks the counting shortcut against the
// textbook bootstrap (materialise the resample, sort, take its median) driven
// by the same random indices.
func TestBootstrapCountingEqualsNaive(t *testing.T) {
	for _, n := range []int{2, 3, 10, 11, 64} {
		x := make([]float64, n)
		r := rand.New(rand.NewPCG(uint64(n), 1))
		for i := range x {
			x[i] = math.Round(r.NormFloat64() * 5) // ties on purpose
		}
		slices.Sort(x)
		const B = 200
		got := BootstrapMedianCI(x, 0.9, B, 9, 10)
		rng := rand.New(rand.NewPCG(9, 10))
		meds := make([]float64, B)
		res := make([]float64, n)
		for b := range meds {
			for i := 0; i < n; i += 2 {
				r := rng.Uint64()
				res[i] = x[(r&0xffffffff)*uint64(n)>>32]
				if i+1 < n {
					res[i+1] = x[(r>>32)*uint64(n)>>32]
				}
			}
			slices.Sort(res)
			meds[b] = QuantileSorted(res, 0.5)
		}
		slices.Sort(meds)
		want := Interval{QuantileSorted(meds, 0.05), QuantileSorted(meds, 0.95)}
		if x[0] == x[n-1] {
			want = Interval{x[0], x[0]}
		}
		if got != want {
			t.Errorf("n=%d: counting %+v, naive %+v", n, got, want)
		}
	}
}

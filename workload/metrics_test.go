package workload

import (
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
)

func TestJitter(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{5}, 0, false},
		{[]float64{10, 12, 9, 9}, (2.0 + 3.0 + 0.0) / 3, true},
		{[]float64{1, 1, 1}, 0, true},
	}
	for _, c := range cases {
		if got, ok := Jitter(c.in); got != c.want || ok != c.ok {
			t.Errorf("Jitter(%v) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestGoodput(t *testing.T) {
	if got := GoodputMbps(1_000_000, time.Second); got != 8 {
		t.Fatalf("1 MB in 1 s = %v Mbit/s, want 8", got)
	}
	if got := GoodputMbps(1000, 0); got != 0 {
		t.Fatalf("zero duration gives %v, want 0", got)
	}
}

func TestBinsKeepsEmptyBins(t *testing.T) {
	pts := Bins([]Chunk{{T: 1e6, N: 100}, {T: 2e6, N: 50}, {T: 35e6, N: 10}}, 10e6)
	if len(pts) != 4 {
		t.Fatalf("got %d bins, want 4", len(pts))
	}
	want := []float64{150, 0, 0, 10}
	for i, p := range pts {
		if p.V != want[i] || p.T != int64(i)*10e6 {
			t.Errorf("bin %d = %+v, want T=%d V=%v", i, p, int64(i)*10e6, want[i])
		}
	}
}

func TestIntervals(t *testing.T) {
	// arrivals at 0, 50, 100, 250, 300 ms: gaps 50, 50, 150, 50
	ms := int64(time.Millisecond)
	st := Intervals([]int64{0, 50 * ms, 100 * ms, 250 * ms, 300 * ms}, 100*time.Millisecond)
	if st.P50 != 50 || st.P95 != 150 || st.Max != 150 || st.Stalls != 1 {
		t.Fatalf("got %+v", st)
	}
	if len(st.Intervals) != 4 {
		t.Fatalf("want 4 intervals, got %d", len(st.Intervals))
	}
}

func TestNearestRank(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 5, 0.95: 10, 0.1: 1, 0.11: 2, 1: 10} {
		if got := NearestRank(s, q); got != want {
			t.Errorf("q=%v: got %v want %v", q, got, want)
		}
	}
}

func TestSpan(t *testing.T) {
	if got := Span([]int64{5, 3, 9}, []int64{10, 20, 15}); got != 17 {
		t.Fatalf("span = %d, want 17", got)
	}
}

func TestEmptyBinsInside(t *testing.T) {
	pts := Bins([]Chunk{{T: 25e6, N: 1}, {T: 55e6, N: 1}, {T: 65e6, N: 1}}, 10e6)
	// bins: 0 0 1 0 0 1 1 -> two empty bins between the first and last byte
	if got := EmptyBinsInside(pts); got != 2 {
		t.Fatalf("got %d, want 2", got)
	}
	if got := EmptyBinsInside(nil); got != 0 {
		t.Fatalf("no bins: got %d", got)
	}
}

func TestSegmentArrivals(t *testing.T) {
	// three segments of 10 bytes arriving in chunks that straddle boundaries
	chunks := []endpoint.Chunk{{T: 1, Bytes: 6}, {T: 2, Bytes: 6}, {T: 3, Bytes: 18}}
	got := SegmentArrivals(chunks, 10, 3)
	want := []int64{2, 3, 3}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestHOLBinFor(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tt := range []struct{ last, want int64 }{
		{0, ms / 10},
		{9 * ms, ms / 10},       // 90 bins of 100 us
		{10 * ms, ms / 5},       // 100 bins would be too many: 200 us
		{50 * ms, ms},           // 50 bins of 1 ms (500 us would give 100)
		{16_000 * ms, 200 * ms}, // 80 bins
	} {
		got := HOLBinFor(tt.last)
		if got != tt.want {
			t.Errorf("HOLBinFor(%v) = %v, want %v", time.Duration(tt.last), time.Duration(got), time.Duration(tt.want))
		}
		if n := tt.last/got + 1; n > HOLMaxBins {
			t.Errorf("HOLBinFor(%v): %d bins", time.Duration(tt.last), n)
		}
	}
}

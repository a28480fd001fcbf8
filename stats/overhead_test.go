package stats

import (
	"slices"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/model"
)

func TestSpreadOf(t *testing.T) {
	if s := SpreadOf(nil); s != (Spread{}) || s.String() != "–" {
		t.Errorf("empty: %+v %q", s, s.String())
	}
	// 1..20 ms in reverse: nearest rank p50 = 10th value, p95 = 19th.
	var d []time.Duration
	for i := 20; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	in := slices.Clone(d)
	s := SpreadOf(d)
	want := Spread{P50: 10 * time.Millisecond, P95: 19 * time.Millisecond, Max: 20 * time.Millisecond, N: 20}
	if s != want {
		t.Errorf("SpreadOf = %+v, want %+v", s, want)
	}
	if !slices.Equal(d, in) {
		t.Error("SpreadOf sorted its argument")
	}
	if got := s.String(); got != "10ms / 19ms / 20ms over 20 samples" {
		t.Errorf("String = %q", got)
	}
	if got := SpreadOf([]time.Duration{1234567}).String(); got != "1.23ms / 1.23ms / 1.23ms over 1 samples" {
		t.Errorf("rounding: %q", got)
	}
}

func TestOverheadsPerClient(t *testing.T) {
	ms := time.Millisecond
	in := []OverheadSample{
		{Client: model.ClientChromium, Overhead: 900 * ms},
		{Client: model.ClientBuiltin, Overhead: 30 * ms, Drain: 26 * ms},
		{Client: model.ClientBuiltin, Overhead: 3 * ms, Drain: 1 * ms},
		{Client: model.ClientChromium, Overhead: 1100 * ms},
	}
	got := Overheads(in)
	if len(got) != 2 || got[0].Client != model.ClientBuiltin || got[1].Client != model.ClientChromium {
		t.Fatalf("clients %+v, want builtin first, then chromium", got)
	}
	b := got[0]
	if b.Total != (Spread{P50: 3 * ms, P95: 30 * ms, Max: 30 * ms, N: 2}) ||
		b.Drain != (Spread{P50: 1 * ms, P95: 26 * ms, Max: 26 * ms, N: 2}) ||
		b.Own != (Spread{P50: 2 * ms, P95: 4 * ms, Max: 4 * ms, N: 2}) {
		t.Errorf("builtin %+v", b)
	}
	if c := got[1]; c.Total.P50 != 900*ms || c.Own != c.Total || c.Drain.Max != 0 {
		t.Errorf("chromium %+v", c)
	}
	ds := &model.Dataset{
		Cells:   []model.Cell{{ID: 1, Client: model.ClientBuiltin}, {ID: 2, Client: model.ClientChromium}},
		Samples: []model.Sample{{CellID: 2, Overhead: 900 * ms}, {CellID: 1, Overhead: 30 * ms, Drain: 26 * ms}, {CellID: 1, Overhead: 3 * ms, Drain: ms}, {CellID: 2, Overhead: 1100 * ms}},
	}
	if fromDS := DatasetOverheads(ds); !slices.Equal(fromDS, got) {
		t.Errorf("DatasetOverheads = %+v, want %+v", fromDS, got)
	}
}

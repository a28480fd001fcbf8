package stats

import (
	"slices"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
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
		{Client: "chromium", Overhead: 900 * ms, Prep: 600 * ms},
		{Client: model.ClientBuiltin, Overhead: 30 * ms, Drain: 26 * ms},
		{Client: model.ClientBuiltin, Overhead: 3 * ms, Drain: 1 * ms},
		// latency and handshake samples: warm-up or priming before the
		// measured part
		{Client: model.ClientBuiltin, Overhead: 160 * ms, Drain: 26 * ms, Prep: 131 * ms},
		{Client: model.ClientBuiltin, Overhead: 150 * ms, Drain: 25 * ms, Prep: 120 * ms},
		{Client: "chromium", Overhead: 1100 * ms, Prep: 650 * ms},
	}
	got := Overheads(in)
	if len(got) != 2 || got[0].Client != model.ClientBuiltin || got[1].Client != "chromium" {
		t.Fatalf("clients %+v, want builtin first, then chromium", got)
	}
	// nearest rank over 4 values: p50 the 2nd, p95 the 4th
	want := ClientOverhead{
		Client: model.ClientBuiltin,
		Total:  Spread{P50: 30 * ms, P95: 160 * ms, Max: 160 * ms, N: 4}, // 3 30 150 160
		Drain:  Spread{P50: 25 * ms, P95: 26 * ms, Max: 26 * ms, N: 4},   // 1 25 26 26
		Prep:   Spread{P50: 0, P95: 131 * ms, Max: 131 * ms, N: 4},       // 0 0 120 131
		Own:    Spread{P50: 3 * ms, P95: 5 * ms, Max: 5 * ms, N: 4},      // 2 3 4 5
	}
	if got[0] != want {
		t.Errorf("builtin\n got %+v\nwant %+v", got[0], want)
	}
	// nearest rank over 2 values: p50 the 1st, p95 the 2nd
	want = ClientOverhead{
		Client: "chromium",
		Total:  Spread{P50: 900 * ms, P95: 1100 * ms, Max: 1100 * ms, N: 2},
		Drain:  Spread{N: 2},
		Prep:   Spread{P50: 600 * ms, P95: 650 * ms, Max: 650 * ms, N: 2},
		Own:    Spread{P50: 300 * ms, P95: 450 * ms, Max: 450 * ms, N: 2},
	}
	if got[1] != want {
		t.Errorf("chromium\n got %+v\nwant %+v", got[1], want)
	}
	ds := &model.Dataset{
		Cells: []model.Cell{{ID: 1, Client: model.ClientBuiltin}, {ID: 2, Client: "chromium"}},
		Samples: []model.Sample{
			{CellID: 2, Overhead: 900 * ms, Prep: 600 * ms},
			{CellID: 1, Overhead: 30 * ms, Drain: 26 * ms},
			{CellID: 1, Overhead: 3 * ms, Drain: ms},
			{CellID: 1, Overhead: 160 * ms, Drain: 26 * ms, Prep: 131 * ms},
			{CellID: 1, Overhead: 150 * ms, Drain: 25 * ms, Prep: 120 * ms},
			{CellID: 2, Overhead: 1100 * ms, Prep: 650 * ms},
		},
	}
	if fromDS := DatasetOverheads(ds); !slices.Equal(fromDS, got) {
		t.Errorf("DatasetOverheads = %+v, want %+v", fromDS, got)
	}
}

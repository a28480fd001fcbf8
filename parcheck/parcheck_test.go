package parcheck

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// dataset builds a run of the given cells, each with len(values[key])
// counted samples (iteration i has value values[key][i] and seed 1000+i)
// plus a warm-up, every sample at concurrency conc.
func dataset(keys []string, values map[string][]float64, conc int) *model.Dataset {
	ds := &model.Dataset{Run: model.Run{PlanHash: "abc"}}
	id := int64(0)
	for ci, k := range keys {
		ds.Cells = append(ds.Cells, model.Cell{ID: int64(ci + 1), Key: k, Unit: "ms", Metric: "plt_ms"})
		id++
		ds.Samples = append(ds.Samples, model.Sample{ID: id, CellID: int64(ci + 1), Iteration: -1, Warmup: true,
			Seed: 999, Status: model.StatusOK, Value: 1e6, Concurrency: conc})
		for i, v := range values[k] {
			id++
			ds.Samples = append(ds.Samples, model.Sample{ID: id, CellID: int64(ci + 1), Iteration: i,
				Seed: uint64(1000 + i), Status: model.StatusOK, Value: v, Concurrency: conc})
		}
	}
	return ds
}

// noisy returns n values around base with multiplicative noise of sd
// (relative), from a fixed seed.
func noisy(seed uint64, n int, base, sd float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]float64, n)
	for i := range out {
		out[i] = base * (1 + sd*r.NormFloat64())
	}
	return out
}

// jitter perturbs v by a small relative noise (the run-to-run noise of
// one iteration with the same link seed).
func jitter(seed uint64, v []float64, scale, sd float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * scale * (1 + sd*r.NormFloat64())
	}
	return out
}

var twoCells = []string{"a/page/objects=5/h2/builtin/cubic", "a/page/objects=5/h3/builtin/cubic"}

func TestNoShiftIsSame(t *testing.T) {
	ser := map[string][]float64{}
	par := map[string][]float64{}
	for i, k := range twoCells {
		ser[k] = noisy(uint64(i), 20, 800, 0.2)
		par[k] = jitter(uint64(i+10), ser[k], 1, 0.005)
	}
	res, err := Compare(dataset(twoCells, ser, 1), dataset(twoCells, par, 4), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Same || res.Same != 2 {
		t.Fatalf("verdict %s (%d same); want same:\n%s", res.Verdict, res.Same, text(t, res))
	}
	for _, c := range res.Cells {
		if c.Pairs != 20 || math.Abs(c.ShiftPct) > 3 || !(c.PAdj >= 0.05) || c.MaxConcurrency != 4 {
			t.Errorf("%s: %+v", c.Key, c)
		}
		if !c.HLCIPct.Valid() || !c.HLCIPct.Contains(c.HLPct) {
			t.Errorf("%s: HL %v outside its interval %v", c.Key, c.HLPct, c.HLCIPct)
		}
	}
	if res.MaxConcurrency != 4 || len(res.Notes) != 0 {
		t.Errorf("max concurrency %d, notes %q", res.MaxConcurrency, res.Notes)
	}
}

func TestTenPercentShiftMoves(t *testing.T) {
	ser := map[string][]float64{}
	par := map[string][]float64{}
	for i, k := range twoCells {
		ser[k] = noisy(uint64(i), 20, 800, 0.2)
		scale := 1.0
		if i == 1 {
			scale = 1.10 // the h3 cell is 10% slower beside other testbeds
		}
		par[k] = jitter(uint64(i+10), ser[k], scale, 0.01)
	}
	res, err := Compare(dataset(twoCells, ser, 1), dataset(twoCells, par, 3), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Moved || res.Moved != 1 || res.Same != 1 {
		t.Fatalf("verdict %s (%d moved, %d same); want moved once:\n%s", res.Verdict, res.Moved, res.Same, text(t, res))
	}
	c := res.Cells[1]
	if c.Verdict != Moved || c.ShiftPct < 7 || c.ShiftPct > 13 || c.P > 1e-4 || c.PAdj > 1e-3 {
		t.Errorf("moved cell: %+v", c)
	}
	if c.HLCIPct.Lo < 5 || c.HLCIPct.Hi > 15 || !c.HLCIPct.Contains(c.HLPct) {
		t.Errorf("HL %v [%v]; want about +10%%", c.HLPct, c.HLCIPct)
	}
	if !strings.Contains(res.Summary(), "1 of 2 cells") {
		t.Errorf("summary %q", res.Summary())
	}
}

// A consistent but small shift (1%) is significant with enough pairs, but
// its interval lies within the ±5% band: the same answer, as the report
// would call it negligible. With the band off, the test alone moves it.
func TestSignificantSmallShiftIsSame(t *testing.T) {
	k := twoCells[:1]
	ser := map[string][]float64{k[0]: noisy(3, 30, 500, 0.3)}
	par := map[string][]float64{k[0]: jitter(4, ser[k[0]], 1.01, 0.001)}
	res, err := Compare(dataset(k, ser, 1), dataset(k, par, 2), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cells[0]; c.Verdict != Same || c.PAdj >= 0.05 || c.Band != stats.Inside || res.Verdict != Same {
		t.Fatalf("cell %+v (overall %s); want the same: significant, inside the band", c, res.Verdict)
	}
	res, err = Compare(dataset(k, ser, 1), dataset(k, par, 2), Config{MinEffect: -1})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cells[0]; c.Verdict != Moved || !strings.Contains(res.Summary(), "no band (off)") {
		t.Fatalf("band off: cell %+v, summary %q; want moved by the test", c, res.Summary())
	}
}

// A significant shift of about 5% whose interval reaches into the band is
// not a move, but a note counts it; a noisy cell the test cannot tell from
// no shift, with an interval far beyond the band, is noted too.
func TestBandNotes(t *testing.T) {
	ser := map[string][]float64{twoCells[0]: noisy(5, 20, 500, 0.3), twoCells[1]: noisy(6, 20, 500, 0.3)}
	par := map[string][]float64{twoCells[0]: jitter(7, ser[twoCells[0]], 1.05, 0.03), twoCells[1]: jitter(8, ser[twoCells[1]], 1, 0.4)}
	res, err := Compare(dataset(twoCells, ser, 1), dataset(twoCells, par, 2), Config{})
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := res.Cells[0], res.Cells[1]
	if c0.Verdict != Same || c0.Band != stats.Crosses || !(c0.PAdj < 0.05) {
		t.Errorf("5%% cell %+v; want the same, significant, crossing the band", c0)
	}
	if c1.Verdict != Same || c1.Band == stats.Inside || c1.PAdj < 0.05 {
		t.Errorf("noisy cell %+v; want the same, not significant, not inside the band", c1)
	}
	if res.Possibly != 1 || res.Unshown != 1 || len(res.Notes) != 2 {
		t.Errorf("possibly %d, unshown %d, notes %q", res.Possibly, res.Unshown, res.Notes)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reaches into ±5%", "too noisy to show them within it", "wholly outside ±5%"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestSeedMismatchIsAnError(t *testing.T) {
	k := twoCells[:1]
	vals := map[string][]float64{k[0]: noisy(1, 10, 100, 0.1)}
	ser, par := dataset(k, vals, 1), dataset(k, vals, 2)
	par.Samples[4].Seed = 42
	_, err := Compare(ser, par, Config{})
	if err == nil || !strings.Contains(err.Error(), "not paired") || !strings.Contains(err.Error(), "iteration 3") {
		t.Fatalf("error %v; want the unpaired iteration named", err)
	}
}

func TestDifferentPlansAreAnError(t *testing.T) {
	k := twoCells[:1]
	vals := map[string][]float64{k[0]: noisy(1, 10, 100, 0.1)}
	ser, par := dataset(k, vals, 1), dataset(k, vals, 2)
	par.Run.PlanHash = "def"
	if _, err := Compare(ser, par, Config{}); err == nil || !strings.Contains(err.Error(), "different plans") {
		t.Fatalf("error %v", err)
	}
}

func TestMissingCells(t *testing.T) {
	ser := map[string][]float64{}
	for _, k := range twoCells {
		ser[k] = noisy(5, 12, 100, 0.1)
	}
	onlyPar := "b/page/objects=50/h1/builtin/cubic"
	par := map[string][]float64{twoCells[0]: ser[twoCells[0]], onlyPar: noisy(6, 12, 100, 0.1)}
	res, err := Compare(dataset(twoCells, ser, 1), dataset([]string{twoCells[0], onlyPar}, par, 2), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Missing != 2 || res.Same != 1 || res.Verdict != TooFew {
		t.Fatalf("missing %d, same %d, verdict %s:\n%s", res.Missing, res.Same, res.Verdict, text(t, res))
	}
	want := map[string]Verdict{twoCells[0]: Same, twoCells[1]: Missing, onlyPar: Missing}
	for _, c := range res.Cells {
		if c.Verdict != want[c.Key] {
			t.Errorf("%s: %s, want %s", c.Key, c.Verdict, want[c.Key])
		}
	}
	if res.Cells[1].SerialValid != 12 || res.Cells[2].ParallelValid != 12 {
		t.Errorf("valid counts of missing cells: %+v %+v", res.Cells[1], res.Cells[2])
	}
}

// Too few pairs: not enough iterations, or samples that failed in one run.
func TestTooFewPairs(t *testing.T) {
	k := twoCells
	ser := map[string][]float64{k[0]: noisy(1, 4, 100, 0.1), k[1]: noisy(2, 10, 100, 0.1)}
	par := map[string][]float64{k[0]: ser[k[0]], k[1]: ser[k[1]]}
	pd := dataset(k, par, 2)
	// 6 of the second cell's 10 parallel samples failed: 4 pairs left.
	for i := range pd.Samples {
		if s := &pd.Samples[i]; s.CellID == 2 && s.Iteration >= 4 {
			s.Status, s.Value = model.StatusFailed, math.NaN()
		}
	}
	res, err := Compare(dataset(k, ser, 1), pd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != TooFew || res.TooFew != 2 {
		t.Fatalf("verdict %s, too few %d:\n%s", res.Verdict, res.TooFew, text(t, res))
	}
	if c := res.Cells[1]; c.Pairs != 4 || c.SerialValid != 10 || c.ParallelValid != 4 || !math.IsNaN(c.PAdj) {
		t.Errorf("cell %+v", c)
	}
	if s := res.Summary(); !strings.HasPrefix(s, "too few pairs: 2 of 2 cells have fewer than 6") {
		t.Errorf("summary %q", s)
	}
	out := text(t, res)
	if !strings.Contains(out, "4 (10/4 valid)") {
		t.Errorf("table does not show the valid samples beside the pairs:\n%s", out)
	}
}

// A parallel run that never ran two testbeds at once is noted.
func TestSerialParallelRunIsNoted(t *testing.T) {
	k := twoCells[:1]
	vals := map[string][]float64{k[0]: noisy(1, 10, 100, 0.1)}
	for conc, want := range map[int]string{0: "did not record", 1: "never recorded more than one"} {
		res, err := Compare(dataset(k, vals, 1), dataset(k, vals, conc), Config{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Same || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], want) {
			t.Errorf("concurrency %d: verdict %s, notes %q", conc, res.Verdict, res.Notes)
		}
	}
}

func TestOutputs(t *testing.T) {
	k := twoCells
	ser := map[string][]float64{k[0]: noisy(1, 10, 100, 0.1), k[1]: noisy(2, 3, 100, 0.1)}
	par := map[string][]float64{k[0]: jitter(3, ser[k[0]], 1, 0.01), k[1]: ser[k[1]]}
	res, err := Compare(dataset(k, ser, 1), dataset(k, par, 2), Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := text(t, res)
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[0]); f[0] != "CELL" || f[len(f)-1] != "VERDICT" {
		t.Errorf("header %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], k[0]) || !strings.HasSuffix(lines[1], "same") || !strings.Contains(lines[1], " ms") {
		t.Errorf("row %q", lines[1])
	}
	if !strings.HasSuffix(lines[2], "too few pairs") {
		t.Errorf("row %q", lines[2])
	}
	if !strings.Contains(out, "\nverdict: too few pairs: 1 of 2 cells") {
		t.Errorf("no verdict line:\n%s", out)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Verdict string
		Cells   []struct {
			Key    string
			Pairs  int
			P      *float64 `json:"p"`
			PHolm  *float64 `json:"p_holm"`
			HLLo   *float64 `json:"hl_ci_lo_pct"`
			Verdct string   `json:"verdict"`
		}
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if j.Verdict != "too few pairs" || len(j.Cells) != 2 || j.Cells[0].PHolm == nil || j.Cells[1].PHolm != nil || j.Cells[1].HLLo != nil {
		t.Errorf("JSON %s", b)
	}
	var md bytes.Buffer
	if err := res.WriteMarkdown(&md, Source{Plan: "p", Serial: "s.db", Parallel: "p.db", N: 4}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Does parallel change the answer?", "| CELL | PAIRS |", "| `" + k[0] + "` | 10 |", "**Verdict: too few pairs", "at most 2 testbeds"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func text(t *testing.T, r *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Package parcheck answers one question about a parallel run: does taking
// samples on several testbeds at once change what they measure? It sets a
// run of a plan taken one testbed at a time (serial) beside a run of the
// same plan taken N testbeds at a time (parallel) and compares them cell by
// cell, pair by pair.
//
// Both runs give the same iteration of the same cell the same emulator
// seed (runner.IterationSeed depends on the run seed, the cell group and
// the iteration only), so the serial and the parallel sample of one
// iteration crossed the same loss, jitter and reorder decisions: their
// difference removes the link's luck, as the pairs of protocols do in a
// report (docs/statistics.md, "Pairs"). Per cell, Compare reports the
// shift of the medians, the Hodges-Lehmann estimate of the paired
// difference with its 95% interval, the Wilcoxon signed-rank test,
// Holm-corrected over the cells, and a verdict by the report's rule of
// practical significance (docs/statistics.md, "Practical significance"):
// a cell has "moved" only when the test finds a shift and the shift's 95%
// interval lies wholly outside ±MinEffect of the serial median; otherwise
// it is the "same".
//
// The package is pure: it reads two model.Datasets and computes; the
// command that takes the runs is quicbench check-parallel.
package parcheck

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// Config holds the thresholds of the verdicts. The zero value of a field
// means its default (see Default).
type Config struct {
	// MinEffect is the smallest shift of interest, as a fraction of the
	// serial median (default 0.05, as the report's stats.Config.MinEffect):
	// a shift whose interval reaches into ±MinEffect is not a move. A
	// negative value turns the band off: then any significant shift moves.
	MinEffect float64
	// Alpha is the significance level of the Holm-adjusted signed-rank
	// test (default 0.05).
	Alpha float64
	// Level is the confidence level of the Hodges-Lehmann interval
	// (default 0.95).
	Level float64
	// MinPairs is the fewest valid pairs a cell needs for a verdict
	// (default 6: the fewest from which a 95% Hodges-Lehmann interval
	// exists).
	MinPairs int
}

// Default returns the configuration used for a zero field.
func Default() Config { return Config{MinEffect: 0.05, Alpha: 0.05, Level: 0.95, MinPairs: 6} }

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	d := Default()
	c.MinEffect = cmp.Or(c.MinEffect, d.MinEffect)
	c.Alpha = cmp.Or(c.Alpha, d.Alpha)
	c.Level = cmp.Or(c.Level, d.Level)
	c.MinPairs = cmp.Or(c.MinPairs, d.MinPairs)
	return c
}

// Verdict is the outcome of one cell, or of the whole check.
type Verdict string

// Verdicts.
const (
	// Same: the paired test does not reject "no difference" after Holm's
	// correction, or the shift's interval reaches into ±MinEffect.
	Same Verdict = "same"
	// Moved: the paired test found a shift after Holm's correction and its
	// interval lies wholly outside ±MinEffect.
	Moved Verdict = "moved"
	// TooFew: fewer than MinPairs valid pairs; nothing can be said.
	TooFew Verdict = "too few pairs"
	// Missing: the cell is in one run only.
	Missing Verdict = "missing"
)

// Cell is the comparison of one cell of the two runs. Values in % are
// percentages of the serial median; every float is NaN when it cannot be
// computed.
type Cell struct {
	Key  string // model.Cell.Key
	Unit string // unit of the primary metric
	// SerialValid and ParallelValid are each run's valid samples: status
	// ok, not the warm-up, finite primary metric.
	SerialValid, ParallelValid int
	// Pairs is the iterations valid in both runs.
	Pairs int
	// SerialMedian and ParallelMedian are the medians of the paired
	// values of each run.
	SerialMedian, ParallelMedian float64
	// ShiftPct is (parallel median - serial median) / |serial median|, in %.
	ShiftPct float64
	// HLPct is the Hodges-Lehmann estimate of the paired difference
	// parallel - serial, in %, and HLCIPct its interval at Config.Level
	// (NaN with 5 pairs or fewer).
	HLPct   float64
	HLCIPct stats.Interval
	// Band is where HLCIPct lies against ±MinEffect (stats.ClassifyEffect).
	Band stats.Practical
	// P is the two-sided Wilcoxon signed-rank p-value of the paired
	// differences, PAdj the same after Holm's correction over the cells
	// with enough pairs (NaN for the others).
	P, PAdj float64
	// MaxConcurrency is the most testbeds that took samples at once while
	// one of the parallel run's samples of this cell ran (0 when the run
	// did not record it).
	MaxConcurrency int
	Verdict        Verdict
}

// Result is the comparison of a serial and a parallel run.
type Result struct {
	Config Config
	Cells  []Cell // in the serial run's cell order, then cells of the parallel run only
	// MaxConcurrency is the most testbeds active at once over the parallel
	// run (0 when it did not record it).
	MaxConcurrency int
	// Counts of cells per verdict.
	Same, Moved, TooFew, Missing int
	// Possibly counts the cells that are the same although the test found
	// a shift, because its interval reaches into the band; Unshown the
	// cells that are the same because the test found nothing, but whose
	// interval reaches beyond the band (too noisy to show them within it).
	Possibly, Unshown int
	// Verdict is Moved when a cell moved, else TooFew when a cell had too
	// few pairs or is missing from a run, else Same.
	Verdict Verdict
	// Notes say what limits the conclusion (a parallel run that never ran
	// two testbeds at once, say).
	Notes []string
}

// valid reports whether a sample enters the comparison.
func valid(s *model.Sample) bool {
	return s.Status == model.StatusOK && !s.Warmup && s.Iteration >= 0 && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0)
}

// runSamples indexes one run's counted samples by cell key and iteration.
type runSamples struct {
	cells   []model.Cell
	byKey   map[string]map[int]*model.Sample // counted samples (valid or not) by key, iteration
	maxConc map[string]int                   // per cell key, over all its samples
}

func index(ds *model.Dataset, which string) (*runSamples, error) {
	r := &runSamples{cells: ds.Cells, byKey: map[string]map[int]*model.Sample{}, maxConc: map[string]int{}}
	keyOf := make(map[int64]string, len(ds.Cells))
	for _, c := range ds.Cells {
		if _, dup := r.byKey[c.Key]; dup {
			return nil, fmt.Errorf("%s run: cell %s is listed twice", which, c.Key)
		}
		keyOf[c.ID] = c.Key
		r.byKey[c.Key] = map[int]*model.Sample{}
	}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		key, ok := keyOf[s.CellID]
		if !ok {
			return nil, fmt.Errorf("%s run: sample %d belongs to no cell (cell id %d)", which, s.ID, s.CellID)
		}
		r.maxConc[key] = max(r.maxConc[key], s.Concurrency)
		if s.Warmup || s.Iteration < 0 {
			continue
		}
		if _, dup := r.byKey[key][s.Iteration]; dup {
			return nil, fmt.Errorf("%s run: cell %s has two samples of iteration %d", which, key, s.Iteration)
		}
		r.byKey[key][s.Iteration] = s
	}
	return r, nil
}

// Compare compares the serial run with the parallel run of the same plan.
// Samples are paired by cell key and iteration; a pair counts when both
// samples are valid (status ok, not the warm-up, finite primary metric).
// It returns an error when the runs are not of the same plan (different
// plan hashes, when both are recorded) or when two samples of the same
// cell and iteration carry different emulator seeds: then the runs are not
// paired and a paired comparison would be meaningless.
func Compare(serial, parallel *model.Dataset, c Config) (*Result, error) {
	c = c.withDefaults()
	if serial == nil || parallel == nil {
		return nil, fmt.Errorf("parcheck: a run is missing")
	}
	if hs, hp := serial.Run.PlanHash, parallel.Run.PlanHash; hs != "" && hp != "" && hs != hp {
		return nil, fmt.Errorf("the runs are of different plans (plan hash %.12s serial, %.12s parallel): compare two runs of one plan", hs, hp)
	}
	rs, err := index(serial, "serial")
	if err != nil {
		return nil, err
	}
	rp, err := index(parallel, "parallel")
	if err != nil {
		return nil, err
	}
	res := &Result{Config: c}
	inSerial := map[string]bool{}
	for _, cell := range rs.cells {
		inSerial[cell.Key] = true
		pp, ok := rp.byKey[cell.Key]
		if !ok {
			res.Cells = append(res.Cells, missingCell(cell, rs.byKey[cell.Key], nil))
			continue
		}
		cr, err := compareCell(cell, rs.byKey[cell.Key], pp, c)
		if err != nil {
			return nil, err
		}
		cr.MaxConcurrency = rp.maxConc[cell.Key]
		res.Cells = append(res.Cells, cr)
	}
	for _, cell := range rp.cells {
		if !inSerial[cell.Key] {
			mc := missingCell(cell, nil, rp.byKey[cell.Key])
			mc.MaxConcurrency = rp.maxConc[cell.Key]
			res.Cells = append(res.Cells, mc)
		}
	}
	for _, v := range rp.maxConc {
		res.MaxConcurrency = max(res.MaxConcurrency, v)
	}
	decide(res, c)
	return res, nil
}

func countValid(m map[int]*model.Sample) int {
	n := 0
	for _, s := range m {
		if valid(s) {
			n++
		}
	}
	return n
}

func missingCell(cell model.Cell, s, p map[int]*model.Sample) Cell {
	nan := math.NaN()
	return Cell{Key: cell.Key, Unit: cell.Unit, SerialValid: countValid(s), ParallelValid: countValid(p),
		SerialMedian: nan, ParallelMedian: nan, ShiftPct: nan, HLPct: nan, HLCIPct: stats.Interval{Lo: nan, Hi: nan},
		P: nan, PAdj: nan, Verdict: Missing}
}

// compareCell pairs the samples of one cell by iteration and computes the
// figures; the verdict waits for Holm's correction (decide).
func compareCell(cell model.Cell, ser, par map[int]*model.Sample, c Config) (Cell, error) {
	cr := missingCell(cell, ser, par)
	cr.Verdict = ""
	var its []int
	for it, s := range ser {
		p, ok := par[it]
		if !ok {
			continue
		}
		if s.Seed != p.Seed {
			return cr, fmt.Errorf("cell %s, iteration %d: emulator seed %d in the serial run, %d in the parallel run: the runs are not paired (different run seeds?)",
				cell.Key, it, s.Seed, p.Seed)
		}
		if valid(s) && valid(p) {
			its = append(its, it)
		}
	}
	slices.Sort(its)
	cr.Pairs = len(its)
	if cr.Pairs == 0 {
		return cr, nil
	}
	sv := make([]float64, len(its))
	pv := make([]float64, len(its))
	d := make([]float64, len(its))
	for i, it := range its {
		sv[i], pv[i] = ser[it].Value, par[it].Value
		d[i] = pv[i] - sv[i]
	}
	cr.SerialMedian, cr.ParallelMedian = stats.Median(sv), stats.Median(pv)
	ref := math.Abs(cr.SerialMedian)
	pct := func(v float64) float64 {
		if ref == 0 {
			return math.NaN()
		}
		return 100 * v / ref
	}
	cr.ShiftPct = pct(cr.ParallelMedian - cr.SerialMedian)
	hl, ci := stats.HodgesLehmann(d, c.Level)
	cr.HLPct = pct(hl)
	cr.HLCIPct = stats.Interval{Lo: pct(ci.Lo), Hi: pct(ci.Hi)}
	cr.Band = stats.ClassifyEffect(stats.Interval{Lo: cr.HLCIPct.Lo / 100, Hi: cr.HLCIPct.Hi / 100}, c.MinEffect)
	cr.P = stats.SignedRank(d).P
	return cr, nil
}

// decide runs Holm's correction over the cells with enough pairs and sets
// every verdict and the counts.
func decide(res *Result, c Config) {
	ps := make([]float64, len(res.Cells))
	for i := range res.Cells {
		ps[i] = math.NaN()
		if cr := &res.Cells[i]; cr.Verdict == "" && cr.Pairs >= c.MinPairs {
			ps[i] = cr.P
		}
	}
	adj := stats.Holm(ps)
	for i := range res.Cells {
		cr := &res.Cells[i]
		switch {
		case cr.Verdict == Missing:
		case cr.Pairs < c.MinPairs:
			cr.Verdict = TooFew
		default:
			cr.PAdj = adj[i]
			// A NaN adjusted p (no non-zero difference) is no evidence of a
			// change. A significant shift without an interval to judge (a
			// serial median of 0, or the band off) moves.
			switch significant := cr.PAdj < c.Alpha; {
			case !significant:
				cr.Verdict = Same
				if c.MinEffect > 0 && cr.Band != stats.Inside {
					res.Unshown++
				}
			case cr.Band == stats.Inside || cr.Band == stats.Crosses:
				cr.Verdict = Same
				if cr.Band == stats.Crosses {
					res.Possibly++
				}
			default:
				cr.Verdict = Moved
			}
		}
		switch cr.Verdict {
		case Same:
			res.Same++
		case Moved:
			res.Moved++
		case TooFew:
			res.TooFew++
		case Missing:
			res.Missing++
		}
	}
	switch {
	case res.Moved > 0:
		res.Verdict = Moved
	case res.TooFew > 0 || res.Missing > 0 || len(res.Cells) == 0:
		res.Verdict = TooFew
	default:
		res.Verdict = Same
	}
	if res.MaxConcurrency <= 1 {
		what := "never recorded more than one testbed at once"
		if res.MaxConcurrency == 0 {
			what = "did not record how many testbeds ran at once"
		}
		res.Notes = append(res.Notes, "the parallel run "+what+": this check compares it with the serial run, but cannot show that concurrency leaves the answer alone")
	}
	if res.Missing > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d cells are in one run only", res.Missing))
	}
	band := stats.BandText(c.MinEffect)
	if res.Possibly > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d cells shifted significantly, by an amount whose interval reaches into %s: the same by the rule, possibly a small move", res.Possibly, band))
	}
	if res.Unshown > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d cells show no significant shift, but their interval reaches beyond %s: too noisy to show them within it", res.Unshown, band))
	}
}

// Summary is the one-line conclusion of the check.
func (r *Result) Summary() string {
	n := len(r.Cells)
	switch r.Verdict {
	case Same:
		return fmt.Sprintf("same: parallel did not change the answer in any of the %d cells (no shift both significant, Holm-adjusted p < %g, and wholly outside %s)",
			n, r.Config.Alpha, r.bandText())
	case Moved:
		return fmt.Sprintf("moved: parallel changed the answer in %d of %d cells (a shift significant, Holm-adjusted p < %g, and wholly outside %s)",
			r.Moved, n, r.Config.Alpha, r.bandText())
	}
	if n == 0 {
		return "too few pairs: the runs have no cells"
	}
	s := fmt.Sprintf("too few pairs: %d of %d cells have fewer than %d valid pairs", r.TooFew, n, r.Config.MinPairs)
	if r.Missing > 0 {
		s += fmt.Sprintf(", %d are in one run only", r.Missing)
	}
	return s + ": nothing can be concluded about them"
}

// bandText is the band as the verdicts state it: "±5%", or "any band"
// when the rule is off.
func (r *Result) bandText() string {
	if r.Config.MinEffect <= 0 {
		return "no band (off)"
	}
	return stats.BandText(r.Config.MinEffect)
}

// num is a float that encodes as JSON null when it is not finite.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

type jsonCell struct {
	Key            string  `json:"key"`
	Unit           string  `json:"unit"`
	SerialValid    int     `json:"serial_valid"`
	ParallelValid  int     `json:"parallel_valid"`
	Pairs          int     `json:"pairs"`
	SerialMedian   num     `json:"serial_median"`
	ParallelMedian num     `json:"parallel_median"`
	ShiftPct       num     `json:"median_shift_pct"`
	HLPct          num     `json:"hl_pct"`
	HLLoPct        num     `json:"hl_ci_lo_pct"`
	HLHiPct        num     `json:"hl_ci_hi_pct"`
	P              num     `json:"p"`
	PAdj           num     `json:"p_holm"`
	MaxConcurrency int     `json:"max_concurrency"`
	Band           string  `json:"band"`
	Verdict        Verdict `json:"verdict"`
}

// MarshalJSON encodes the result with snake_case names; figures that
// cannot be computed are null.
func (r *Result) MarshalJSON() ([]byte, error) {
	cells := make([]jsonCell, len(r.Cells))
	for i, c := range r.Cells {
		cells[i] = jsonCell{Key: c.Key, Unit: c.Unit, SerialValid: c.SerialValid, ParallelValid: c.ParallelValid, Pairs: c.Pairs,
			SerialMedian: num(c.SerialMedian), ParallelMedian: num(c.ParallelMedian), ShiftPct: num(c.ShiftPct),
			HLPct: num(c.HLPct), HLLoPct: num(c.HLCIPct.Lo), HLHiPct: num(c.HLCIPct.Hi), P: num(c.P), PAdj: num(c.PAdj),
			MaxConcurrency: c.MaxConcurrency, Band: c.Band.String(), Verdict: c.Verdict}
	}
	notes := r.Notes
	if notes == nil {
		notes = []string{}
	}
	return json.Marshal(struct {
		Verdict        Verdict    `json:"verdict"`
		Summary        string     `json:"summary"`
		MinEffectPct   float64    `json:"min_effect_pct"`
		Alpha          float64    `json:"alpha"`
		MinPairs       int        `json:"min_pairs"`
		MaxConcurrency int        `json:"max_concurrency"`
		Same           int        `json:"same"`
		Moved          int        `json:"moved"`
		TooFew         int        `json:"too_few"`
		Missing        int        `json:"missing"`
		Possibly       int        `json:"possibly_moved"`
		Unshown        int        `json:"not_shown_within_band"`
		Notes          []string   `json:"notes"`
		Cells          []jsonCell `json:"cells"`
	}{r.Verdict, r.Summary(), 100 * math.Max(0, r.Config.MinEffect), r.Config.Alpha, r.Config.MinPairs, r.MaxConcurrency,
		r.Same, r.Moved, r.TooFew, r.Missing, r.Possibly, r.Unshown, notes, cells})
}

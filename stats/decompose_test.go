package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// spreadDataset builds one download configuration over network "lossy"
// measured by the stacks of medians (client, server, protocol -> median),
// 12 paired iterations each with a shared link effect and 2% noise.
func spreadDataset(medians map[[3]string]float64, order [][3]string) *model.Dataset {
	ds := &model.Dataset{}
	rng := rand.New(rand.NewPCG(5, 6))
	id := int64(1)
	for _, k := range order {
		client, server, proto := k[0], k[1], k[2]
		group := "lossy/download/" + client + "/cubic/" + server
		ds.Cells = append(ds.Cells, model.Cell{ID: id, Key: "lossy/download/" + proto + "/" + client + "/cubic/" + server, Group: group,
			Scenario: "lossy", Test: "download", Protocol: proto, Client: client, Server: server, CC: "cubic", Metric: "time", Unit: "ms"})
		for i := range 12 {
			link := 1 + 0.2*math.Sin(float64(i))
			ds.Samples = append(ds.Samples, model.Sample{ID: id*100 + int64(i), CellID: id, Iteration: i, Seed: uint64(50 + i),
				Status: model.StatusOK, Value: medians[k] * link * (1 + 0.02*rng.NormFloat64())})
		}
		id++
	}
	return ds
}

func spreadOf(t *testing.T, medians map[[3]string]float64, order [][3]string) *ImplSpread {
	t.Helper()
	an, err := Analyze(spreadDataset(medians, order), Config{Resamples: 100})
	if err != nil {
		t.Fatal(err)
	}
	sp := an.Spreads()
	if len(sp) != 1 {
		t.Fatalf("%d spreads, want 1", len(sp))
	}
	return sp[0]
}

// Three stacks that serve both protocols, h3 30% faster with each:
// the protocol explains nearly all the variation of the medians, and each
// stack's comparison says QUIC faster.
func TestDecomposeProtocolDominated(t *testing.T) {
	m := map[[3]string]float64{}
	var order [][3]string
	for i, server := range []string{model.ServerQuicbench, "caddy", "nginx-like"} {
		speed := []float64{1, 1.03, 0.98}[i]
		for _, p := range []string{"h2", "h3"} {
			k := [3]string{model.ClientBuiltin, server, p}
			m[k] = 200 * speed * map[string]float64{"h2": 1, "h3": 0.7}[p]
			order = append(order, k)
		}
	}
	sp := spreadOf(t, m, order)
	d := sp.Decomposition
	if d.Design != DesignCrossed || d.Stacks != 3 || d.Cells != 6 {
		t.Fatalf("decomposition %+v, want crossed over 3 stacks", d)
	}
	if d.Protocol < 0.95 || d.Implementation > 0.05 || math.Abs(d.Protocol+d.Implementation+d.Interaction-1) > 1e-9 {
		t.Errorf("shares %+v, want the protocol to explain nearly all", d)
	}
	if len(d.Effects) != 1 || d.Effects[0].A != "h3" || math.Abs(d.Effects[0].Rel+0.3) > 0.03 {
		t.Errorf("effects %+v, want h3 vs h2 about -30%%", d.Effects)
	}
	if len(sp.Stacks) != 3 || len(sp.Rows) != 6 || sp.Rows[0].Protocol != "h2" || sp.Rows[3].Protocol != "h3" {
		t.Fatalf("stacks %d rows %+v", len(sp.Stacks), sp.Rows)
	}
	for _, s := range sp.Stacks {
		if c := s.Comparisons[0]; c.Verdict != ABetter || c.A.Cell.Protocol != "h3" {
			t.Errorf("%s: %s %q, want QUIC faster", s.Stack, pairNameOf(c), c.Text())
		}
	}
}

// The stacks differ four-fold and the protocols by 2%: the implementation
// explains nearly all of it, and the 2% reads negligible.
func TestDecomposeImplementationDominated(t *testing.T) {
	m := map[[3]string]float64{}
	var order [][3]string
	for i, server := range []string{model.ServerQuicbench, "caddy", "aioquic"} {
		speed := []float64{1, 2, 4}[i]
		for _, p := range []string{"h2", "h3"} {
			k := [3]string{model.ClientBuiltin, server, p}
			m[k] = 100 * speed * map[string]float64{"h2": 1, "h3": 1.02}[p]
			order = append(order, k)
		}
	}
	d := spreadOf(t, m, order).Decomposition
	if d.Design != DesignCrossed || d.Implementation < 0.95 || d.Protocol > 0.02 {
		t.Errorf("shares %+v, want the implementation to explain nearly all", d)
	}
}

// An interaction: h3 is twice as fast with one stack and twice as slow
// with the other, and the stacks are as fast overall: neither main effect,
// the interaction explains it all.
func TestDecomposeInteraction(t *testing.T) {
	m := map[[3]string]float64{
		{model.ClientBuiltin, model.ServerQuicbench, "h2"}: 100, {model.ClientBuiltin, model.ServerQuicbench, "h3"}: 50,
		{model.ClientBuiltin, "caddy", "h2"}: 50, {model.ClientBuiltin, "caddy", "h3"}: 100,
	}
	order := [][3]string{{model.ClientBuiltin, model.ServerQuicbench, "h2"}, {model.ClientBuiltin, model.ServerQuicbench, "h3"},
		{model.ClientBuiltin, "caddy", "h2"}, {model.ClientBuiltin, "caddy", "h3"}}
	d := spreadOf(t, m, order).Decomposition
	if d.Interaction < 0.95 || d.Protocol > 0.02 || d.Implementation > 0.02 || math.Abs(d.Effects[0].Rel) > 0.05 {
		t.Errorf("%+v, want the interaction to explain nearly all and no protocol effect", d)
	}
}

// Stacks that serve one protocol each (as aioquic serves only h3): fewer
// than two stacks measured both, so the split is nested, protocol against
// the implementations within it.
func TestDecomposeNested(t *testing.T) {
	k := func(server, proto string) [3]string { return [3]string{model.ClientBuiltin, server, proto} }
	order := [][3]string{k(model.ServerQuicbench, "h2"), k(model.ServerQuicbench, "h3"), k("aioquic", "h3"), k("quiche", "h3")}
	// protocol-dominated: every h3 stack well below h2
	m := map[[3]string]float64{order[0]: 300, order[1]: 150, order[2]: 155, order[3]: 148}
	d := spreadOf(t, m, order).Decomposition
	if d.Design != DesignNested || d.Cells != 4 || d.Stacks != 3 || d.Protocol < 0.95 || !math.IsNaN(d.Interaction) {
		t.Errorf("protocol-dominated nested: %+v", d)
	}
	if math.Abs(d.Protocol+d.Implementation-1) > 1e-9 {
		t.Errorf("shares do not add up: %+v", d)
	}
	// implementation-dominated: the h3 stacks spread around h2
	m = map[[3]string]float64{order[0]: 150, order[1]: 40, order[2]: 600, order[3]: 150}
	if d := spreadOf(t, m, order).Decomposition; d.Implementation < 0.9 {
		t.Errorf("implementation-dominated nested: %+v", d)
	}
}

// Shares of known values, by hand: a 2 x 2 table of log medians
// {0, 1; 2, 3} (rows: stacks) has m = 1.5, stack effects ±1, protocol
// effects ±0.5, no interaction: SS_total 5, stack 4, protocol 1.
func TestDecomposeByHand(t *testing.T) {
	mk := func(stack, proto string, logm float64) SpreadRow {
		return SpreadRow{Protocol: proto, Stack: stack, Cell: &CellStats{Summary: Summary{Median: math.Exp(logm)}}}
	}
	rows := []SpreadRow{mk("a", "h2", 0), mk("a", "h3", 1), mk("b", "h2", 2), mk("b", "h3", 3)}
	d := Decompose(rows, []string{"h2", "h3"})
	if d.Design != DesignCrossed || math.Abs(d.Protocol-0.2) > 1e-12 || math.Abs(d.Implementation-0.8) > 1e-12 || math.Abs(d.Interaction) > 1e-12 {
		t.Errorf("%+v, want protocol 0.2, implementation 0.8, interaction 0", d)
	}
	if math.Abs(d.Effects[0].Rel-(math.E-1)) > 1e-12 {
		t.Errorf("effect %v, want e - 1", d.Effects[0].Rel)
	}
	// a median of 0 cannot be logged: the shares are NaN
	rows[0].Cell.Summary.Median = 0
	if d := Decompose(rows, []string{"h2", "h3"}); !math.IsNaN(d.Protocol) || d.Design != DesignCrossed {
		t.Errorf("zero median: %+v", d)
	}
	// a cell without a valid sample is not measured: its stack drops out
	rows[0].Cell.Summary.Median = math.NaN()
	if d := Decompose(rows, []string{"h2", "h3"}); d.Design != DesignNested || d.Cells != 3 || math.IsNaN(d.Protocol) {
		t.Errorf("a cell not measured: %+v, want nested over the 3 others", d)
	}
	// nor is a protocol none of whose cells was
	rows[2].Cell.Summary.Median = math.NaN()
	if d := Decompose(rows, []string{"h2", "h3"}); d.Design != "" {
		t.Errorf("h2 not measured at all: %+v, want no decomposition", d)
	}
	rows[0].Cell.Summary.Median, rows[2].Cell.Summary.Median = 1, math.Exp(2)
	// one protocol: nothing to split
	if d := Decompose(rows[:1], []string{"h2"}); d.Design != "" {
		t.Errorf("one protocol: %+v", d)
	}
}

func pairNameOf(c *Comparison) string { return c.A.Cell.Protocol + " vs " + c.B.Cell.Protocol }

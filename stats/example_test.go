package stats_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// Load a results database and compute its comparisons. The database is
// written here through the store API with synthetic samples, as
// quicbench run writes a real one: two groups of cells that differ only by
// protocol, 20 paired iterations each. Over the lossy link HTTP/3's time to
// first byte is 30% lower than HTTP/2's; over the clean one both are the
// same, and the 95% interval of their difference lies within the smallest
// effect of interest (±5% by default): negligible.
func Example() {
	dir, err := os.MkdirTemp("", "quicbench-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "results.db")
	if err := writeResults(path); err != nil {
		fmt.Println(err)
		return
	}

	// What a library user does with a results database.
	ctx := context.Background()
	db, err := store.OpenExisting(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	run, err := db.LatestRun(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	ds, err := db.LoadDataset(ctx, run.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := stats.Analyze(ds, stats.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range a.Groups {
		for _, c := range g.Comparisons {
			an, bn := c.Names()
			fmt.Printf("%s, %s: %s vs %s over %d pairs, median %+.0f%%: %s\n",
				g.Label(), g.Test, an, bn, c.Pairs, 100*c.RelDiff, c.Text())
		}
	}
	// Output:
	// clean, ttfb: QUIC vs TCP over 20 pairs, median +0%: negligible (within ±5%)
	// lossy, ttfb: QUIC vs TCP over 20 pairs, median -30%: QUIC faster
}

// writeResults creates a results database at path holding one run of two
// ttfb cell groups (clean and lossy), h2 and h3 in each.
func writeResults(path string) error {
	ctx := context.Background()
	db, err := store.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	run := model.Run{PlanName: "example", PlanText: "name: example\n", PlanHash: "00", Seed: 1,
		Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Status: store.RunComplete}
	if err := db.CreateRun(ctx, &run); err != nil {
		return err
	}
	var cells []model.Cell
	for _, scenario := range []string{"clean", "lossy"} {
		for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
			group := scenario + "/ttfb/builtin/cubic"
			cells = append(cells, model.Cell{
				Key: scenario + "/ttfb/" + proto + "/builtin/cubic", Group: group, Scenario: scenario,
				Test: "ttfb", Protocol: proto, Client: model.ClientBuiltin, CC: "cubic",
				Metric: "ttfb_ms", Unit: "ms", Iterations: 20,
			})
		}
	}
	if err := db.InsertCells(ctx, run.ID, cells); err != nil {
		return err
	}
	for i := range 20 {
		for k, c := range cells {
			v := 50 + float64(i%7) // ms: 50 to 56, the same spread in every cell
			if c.Scenario == "lossy" {
				v *= 2
				if c.Protocol == model.ProtoH3 {
					v *= 0.7 // one round trip fewer
				}
			}
			s := model.Sample{CellID: c.ID, Iteration: i, Seed: uint64(i + 1), Order: k % 2,
				Status: model.StatusOK, Value: v, Metrics: map[string]float64{"ttfb_ms": v}}
			if err := db.InsertSample(ctx, &s); err != nil {
				return err
			}
		}
	}
	return nil
}

// FormatP gives a p-value the detail a reader needs.
func ExampleFormatP() {
	for _, p := range []float64{math.NaN(), 0.00001, 0.00042, 0.0312, 0.5} {
		fmt.Println(stats.FormatP(p))
	}
	// Output:
	// –
	// <0.0001
	// 0.0004
	// 0.031
	// 0.500
}

package cli

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/store"
)

// writeResultsDB creates results.db in a temporary directory, lets fill
// write to it, closes it and returns its path.
func writeResultsDB(t *testing.T, fill func(ctx context.Context, db *store.DB)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(context.Background(), db)
	return path
}

// exportDB writes a small results database: one run, two cells, two samples.
func exportDB(t *testing.T) (string, int64) {
	t.Helper()
	run := model.Run{PlanName: "quick", PlanText: "name: quick\n", PlanHash: "ab", Seed: 1, Started: time.Unix(1, 0)}
	path := writeResultsDB(t, func(ctx context.Context, db *store.DB) {
		if err := db.CreateRun(ctx, &run); err != nil {
			t.Fatal(err)
		}
		cells := []model.Cell{
			{Key: "a/h2", Group: "a", Test: "ttfb", Protocol: model.ProtoH2, Metric: "ttfb_ms", Iterations: 1},
			{Key: "a/h3", Group: "a", Test: "ttfb", Protocol: model.ProtoH3, Metric: "ttfb_ms", Iterations: 1},
		}
		if err := db.InsertCells(ctx, run.ID, cells); err != nil {
			t.Fatal(err)
		}
		for i, c := range cells {
			s := model.Sample{CellID: c.ID, Status: model.StatusOK, Value: float64(40 + i),
				Metrics: map[string]float64{"ttfb_ms": float64(40 + i)}}
			if err := db.InsertSample(ctx, &s); err != nil {
				t.Fatal(err)
			}
		}
	})
	return path, run.ID
}

func TestExportCommand(t *testing.T) {
	path, _ := exportDB(t)
	code, out, errs := runCLI(t, "export", path)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	paths := strings.Fields(out)
	if len(paths) != len(store.Tables) {
		t.Fatalf("printed %d paths, want %d:\n%s", len(paths), len(store.Tables), out)
	}
	wantDir := strings.TrimSuffix(path, ".db") + "-export"
	if paths[2] != filepath.Join(wantDir, "samples.csv") {
		t.Fatalf("samples written to %s, want %s", paths[2], filepath.Join(wantDir, "samples.csv"))
	}
	f, err := os.Open(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("samples.csv: %d records, %v", len(recs), err)
	}
	if !strings.Contains(strings.Join(recs[0], ","), "m_ttfb_ms") {
		t.Fatalf("samples.csv header lacks m_ttfb_ms: %v", recs[0])
	}

	dir := t.TempDir()
	code, out, errs = runCLI(t, "export", path, "--format", "parquet", "--table", "samples,cells", "--run", "1", "-o", dir)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := filepath.Join(dir, "samples.parquet") + "\n" + filepath.Join(dir, "cells.parquet") + "\n"
	if out != want {
		t.Fatalf("printed %q, want %q", out, want)
	}
	for _, p := range strings.Fields(out) {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

func TestExportCommandBadInput(t *testing.T) {
	path, _ := exportDB(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"export", path, "--format", "xlsx"}, `unknown format "xlsx"`},
		{[]string{"export", path, "--table", "samples,bogus"}, `unknown table "bogus"`},
		{[]string{"export", path, "--run", "7"}, "run 7: not found"},
		{[]string{"export", path, "--run", "-1"}, "run IDs are positive"},
		{[]string{"export"}, "one results database"},
		{[]string{"export", filepath.Join(t.TempDir(), "nope.db")}, "no such database file"},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, ExitUsage, c.want)
		}
		if out != "" {
			t.Errorf("%v: printed %q", c.args, out)
		}
	}
}

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

var ctx = context.Background()

func TestOpenCreatesSchemaAndReopens(t *testing.T) {
	db, path := openTemp(t)
	v, err := db.Version(ctx)
	if err != nil || v != len(migrations) {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(migrations))
	}
	for _, table := range []string{"runs", "cells", "samples", "sample_metrics", "transport_stats",
		"timelines", "resources", "warnings", "schema_version", "timeline_points"} {
		var n int
		if err := db.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", table, n, err)
		}
	}
	r := mustCreateRun(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var rows int
	if err := db2.r.QueryRow(`SELECT count(*) FROM schema_version`).Scan(&rows); err != nil || rows != len(migrations) {
		t.Fatalf("schema_version has %d rows (%v) after reopening; migrations ran again?", rows, err)
	}
	got, err := db2.RunByID(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("run after reopen:\n got %+v\nwant %+v", got, r)
	}
}

func TestOpenPragmas(t *testing.T) {
	db, _ := openTemp(t)
	for name, pool := range map[string]*sql.DB{"writer": db.w, "reader": db.r} {
		var mode string
		var syncMode, fk, busy int
		if err := pool.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(`PRAGMA synchronous`).Scan(&syncMode); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || syncMode != 2 || fk != 1 || busy != int(busyTimeout.Milliseconds()) {
			t.Errorf("%s: journal_mode=%s synchronous=%d foreign_keys=%d busy_timeout=%d; want wal, 2 (FULL), 1, %d",
				name, mode, syncMode, fk, busy, busyTimeout.Milliseconds())
		}
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	db, path := openTemp(t)
	if _, err := db.w.Exec(`INSERT INTO schema_version (version, applied_ns) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Fatalf("Open of a newer database: err = %v", err)
	}
}

func TestOpenRejectsForeignDatabase(t *testing.T) {
	path := foreignDatabase(t)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "not a quicbench database") {
		t.Fatalf("Open of a foreign database: err = %v", err)
	}

	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("this is not sqlite\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage); err == nil || !strings.Contains(err.Error(), "garbage.db") {
		t.Fatalf("Open of a non-database file: err = %v (want an error naming the file)", err)
	}
}

func TestOpenExistingDoesNotCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	if _, err := OpenExisting(path); err == nil || !strings.Contains(err.Error(), "no such database file") {
		t.Fatalf("OpenExisting(missing) err = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created %s", path)
	}
	if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("Open(dir) err = %v", err)
	}
}

func TestRuns(t *testing.T) {
	db, _ := openTemp(t)
	if _, err := db.LatestRun(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LatestRun on empty db: %v", err)
	}
	r1 := mustCreateRun(t, db)
	r2 := testRun()
	r2.Env.Sysctls = nil
	r2.Started = time.Time{}
	r2.Status = ""
	if err := db.CreateRun(ctx, &r2); err != nil {
		t.Fatal(err)
	}
	if r2.ID == r1.ID || r2.Status != RunRunning || r2.Started.IsZero() {
		t.Fatalf("CreateRun defaults: %+v", r2)
	}
	fin := time.Date(2025, 3, 4, 6, 0, 0, 5, time.UTC)
	if err := db.UpdateRunStatus(ctx, r1.ID, RunComplete, fin); err != nil {
		t.Fatal(err)
	}
	r1.Status, r1.Finished = RunComplete, fin
	runs, err := db.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || !reflect.DeepEqual(runs[0], r1) || runs[1].ID != r2.ID {
		t.Fatalf("Runs = %+v", runs)
	}
	latest, err := db.LatestRun(ctx)
	if err != nil || latest.ID != r2.ID {
		t.Fatalf("LatestRun = %d, %v; want %d", latest.ID, err, r2.ID)
	}
	if _, err := db.RunByID(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RunByID(999): %v", err)
	}
	if err := db.UpdateRunStatus(ctx, 999, RunComplete, fin); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpdateRunStatus(999): %v", err)
	}
	if err := db.UpdateRunStatus(ctx, r1.ID, "done", fin); err == nil || !strings.Contains(err.Error(), `"done"`) {
		t.Fatalf("UpdateRunStatus(bad status): %v", err)
	}
	if err := db.AddRunWarning(ctx, r1.ID, "only 2 CPUs"); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRunWarning(ctx, r1.ID, "clock jumped"); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRunWarning(ctx, 999, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AddRunWarning(999): %v", err)
	}
	ws, err := db.RunWarnings(ctx, r1.ID)
	if err != nil || !reflect.DeepEqual(ws, []string{"only 2 CPUs", "clock jumped"}) {
		t.Fatalf("RunWarnings = %q, %v", ws, err)
	}
}

func TestInsertCellsIdempotent(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 4)
	for i, c := range cells {
		if c.ID == 0 {
			t.Fatalf("cell %d has no ID", i)
		}
	}
	// Resume: the same cells again, plus two new ones, in a new slice.
	again := append(testCells(4), testCells(6)[4:]...)
	if err := db.InsertCells(ctx, r.ID, again); err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		if again[i].ID != cells[i].ID {
			t.Fatalf("re-inserted cell %d got ID %d, first time %d", i, again[i].ID, cells[i].ID)
		}
	}
	got, err := db.Cells(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("Cells:\n got %+v\nwant %+v", got, again)
	}

	changed := testCells(1)
	changed[0].Iterations = 20
	err = db.InsertCells(ctx, r.ID, changed)
	if err == nil || !strings.Contains(err.Error(), "different Iterations (stored 10, now 20)") {
		t.Fatalf("InsertCells with a changed cell: %v", err)
	}
	dup := testCells(2)
	dup[1].Key = dup[0].Key
	if err := db.InsertCells(ctx, r.ID, dup); err == nil || !strings.Contains(err.Error(), "same key") {
		t.Fatalf("InsertCells with duplicate keys: %v", err)
	}
	if err := db.InsertCells(ctx, 999, testCells(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("InsertCells for a missing run: %v", err)
	}
	if n, _ := db.Cells(ctx, r.ID); len(n) != 6 {
		t.Fatalf("failed InsertCells calls changed the cells: %d cells", len(n))
	}
}

// TestSampleRoundTrip stores fully populated samples out of order and loads
// them back: every field must survive, in cell-then-iteration order.
func TestSampleRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 2)
	// A second run whose samples must not leak into the first one's dataset.
	other, otherCells := mustRunWithCells(t, db, 1)

	var want []model.Sample
	for _, c := range cells {
		for it := -1; it < 3; it++ {
			want = append(want, fullSample(c.ID, it, 200))
		}
	}
	want[2].Status, want[2].Error, want[2].Metrics = model.StatusFailed, "timeout after 30s", nil
	want[3].Transport, want[3].Timelines, want[3].Resources, want[3].Warnings = nil, nil, nil, nil
	order := []int{7, 0, 5, 2, 6, 1, 3, 4}
	o := fullSample(otherCells[0].ID, 0, 5)
	for k, i := range order {
		if k == 4 { // the other run's sample lands inside this run's ID range
			if err := db.InsertSample(ctx, &o); err != nil {
				t.Fatal(err)
			}
		}
		s := want[i]
		if err := db.InsertSample(ctx, &s); err != nil {
			t.Fatal(err)
		}
		if s.ID == 0 {
			t.Fatal("InsertSample did not set the ID")
		}
		want[i].ID = s.ID
	}
	ds, err := db.LoadDataset(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ds.Run, r) {
		t.Errorf("run:\n got %+v\nwant %+v", ds.Run, r)
	}
	if !reflect.DeepEqual(ds.Cells, cells) {
		t.Errorf("cells:\n got %+v\nwant %+v", ds.Cells, cells)
	}
	if len(ds.Samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(ds.Samples), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(ds.Samples[i], want[i]) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, ds.Samples[i], want[i])
		}
	}
	ods, err := db.LoadDataset(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ods.Samples) != 1 || !reflect.DeepEqual(ods.Samples[0], o) {
		t.Errorf("other run's samples: %+v", ods.Samples)
	}
	// The same through the parallel reading of the samples table.
	forceParallelLoad(t)
	pds, err := db.LoadDataset(ctx, r.ID)
	if err != nil || !reflect.DeepEqual(pds, ds) {
		t.Errorf("parallel load differs from the serial one (%v)", err)
	}
	if pods, err := db.LoadDataset(ctx, other.ID); err != nil || !reflect.DeepEqual(pods, ods) {
		t.Errorf("parallel load of the other run differs (%v)", err)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNonFiniteValues(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 1)
	s := fullSample(cells[0].ID, 0, 3)
	s.Status, s.Value = model.StatusFailed, math.NaN()
	s.Metrics = map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1)}
	s.Transport[0].SmoothedRTTms = math.NaN()
	s.Timelines[0].Points[1].V = math.NaN()
	s.Timelines[0].Points[2].V = math.Inf(-1)
	if err := db.InsertSample(ctx, &s); err != nil {
		t.Fatal(err)
	}
	ds, err := db.LoadDataset(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	g := ds.Samples[0]
	if !math.IsNaN(g.Value) || !math.IsNaN(g.Metrics["nan"]) || !math.IsInf(g.Metrics["inf"], 1) ||
		!math.IsInf(g.Metrics["ninf"], -1) || !math.IsNaN(g.Transport[0].SmoothedRTTms) ||
		!math.IsNaN(g.Timelines[0].Points[1].V) || !math.IsInf(g.Timelines[0].Points[2].V, -1) {
		t.Fatalf("non-finite values did not survive: value %v metrics %v srtt %v points %v",
			g.Value, g.Metrics, g.Transport[0].SmoothedRTTms, g.Timelines[0].Points)
	}
}

func TestDuplicateSampleRejected(t *testing.T) {
	db, _ := openTemp(t)
	_, cells := mustRunWithCells(t, db, 1)
	for _, it := range []int{-1, 4} {
		s := fullSample(cells[0].ID, it, 10)
		if err := db.InsertSample(ctx, &s); err != nil {
			t.Fatal(err)
		}
		dup := fullSample(cells[0].ID, it, 10)
		dup.Value = 1
		err := db.InsertSample(ctx, &dup)
		if !errors.Is(err, ErrDuplicateSample) || !strings.Contains(err.Error(), cells[0].Key) {
			t.Fatalf("duplicate of iteration %d: err = %v", it, err)
		}
		if dup.ID != 0 {
			t.Fatalf("rejected sample got ID %d", dup.ID)
		}
	}
	// Nothing of the rejected samples may remain.
	for table, want := range map[string]int{"samples": 2, "sample_metrics": 10, "transport_stats": 4,
		"timelines": 4, "resources": 4, "warnings": 4} {
		var n int
		if err := db.r.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil || n != want {
			t.Errorf("%s has %d rows (%v), want %d", table, n, err, want)
		}
	}
}

func TestInsertSampleValidation(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 1)
	cases := map[string]func(*model.Sample){
		`status "done"`:       func(s *model.Sample) { s.Status = "done" },
		"iteration -2":        func(s *model.Sample) { s.Iteration = -2 },
		"only they do":        func(s *model.Sample) { s.Warmup = true },
		"cell 12345":          func(s *model.Sample) { s.CellID = 12345 },
		"no cell":             func(s *model.Sample) { s.CellID = 0 },
		"metric has an empty": func(s *model.Sample) { s.Metrics[""] = 1 },
	}
	for want, mutate := range cases {
		s := fullSample(cells[0].ID, 0, 2)
		mutate(&s)
		if err := db.InsertSample(ctx, &s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
	if n, _ := db.SampleCount(ctx, r.ID); n != 0 {
		t.Fatalf("invalid samples were stored: %d", n)
	}
}

func TestDoneSamplesAndCount(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 3)
	stored := map[int64][]int{cells[0].ID: {-1, 0, 1}, cells[2].ID: {0, 5}}
	for cell, its := range stored {
		for _, it := range its {
			s := fullSample(cell, it, 0)
			if it == 5 {
				s.Status, s.Error = model.StatusFailed, "connection refused"
			}
			if err := db.InsertSample(ctx, &s); err != nil {
				t.Fatal(err)
			}
		}
	}
	done, err := db.DoneSamples(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]map[int]bool{
		cells[0].ID: {-1: true, 0: true, 1: true},
		cells[2].ID: {0: true, 5: true},
	}
	if !reflect.DeepEqual(done, want) {
		t.Fatalf("DoneSamples = %v, want %v", done, want)
	}
	if n, err := db.SampleCount(ctx, r.ID); err != nil || n != 5 {
		t.Fatalf("SampleCount = %d, %v; want 5", n, err)
	}
}

// TestTimelinePointsView checks that the SQL view gives one row per point
// with the stored values.
func TestTimelinePointsView(t *testing.T) {
	db, _ := openTemp(t)
	_, cells := mustRunWithCells(t, db, 1)
	s := fullSample(cells[0].ID, 0, 50)
	if err := db.InsertSample(ctx, &s); err != nil {
		t.Fatal(err)
	}
	rows, err := db.r.Query(`SELECT series, point, t_ns, v FROM timeline_points WHERE sample_id = ? ORDER BY series, point`, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var series, point int
		var tns int64
		var v float64
		if err := rows.Scan(&series, &point, &tns, &v); err != nil {
			t.Fatal(err)
		}
		want := s.Timelines[series].Points[point]
		if tns != want.T || v != want.V {
			t.Fatalf("series %d point %d = (%d, %v), want %+v", series, point, tns, v, want)
		}
		n++
	}
	if n != 53 {
		t.Fatalf("view gave %d points, want 53", n)
	}
}

func TestParsePoints(t *testing.T) {
	pts := []model.Point{{T: -5, V: 1e-310}, {T: 1 << 62, V: -0.1}, {T: 0, V: math.MaxFloat64}}
	got, err := parsePoints(string(appendPoints(nil, pts)), 3)
	if err != nil || !reflect.DeepEqual(got, pts) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if got, err := parsePoints("[]", 0); err != nil || got != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"", "[", "[[1,2]", "[[1,2],]", "[[1.5,2]]", "[[1,]]", "[[1,2]]x", "[[1 2]]", "{}", "[[1,2],[3,4]]"} {
		if _, err := parsePoints(bad, 1); err == nil {
			t.Errorf("parsePoints(%q) accepted malformed input", bad)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m := map[string]float64{"goodput_mbps": 12.5, "a\"b\\c": 1, "é\n": -2e-9, "big": math.MaxFloat64, "z": 0}
	enc := string(appendMetrics(nil, m))
	got, err := parseMetrics(enc, nil)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip of %s: %v, %v", enc, got, err)
	}
	var std map[string]float64
	if err := json.Unmarshal([]byte(enc), &std); err != nil || !reflect.DeepEqual(std, m) {
		t.Fatalf("%s is not the JSON of %v: %v, %v", enc, m, std, err)
	}
	nf := appendMetrics(nil, map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1)})
	if !json.Valid(nf) {
		t.Fatalf("non-finite metrics are not strict JSON: %s", nf)
	}
	got, err = parseMetrics(string(nf), nil)
	if err != nil || !math.IsNaN(got["nan"]) || !math.IsInf(got["inf"], 1) || !math.IsInf(got["ninf"], -1) {
		t.Fatalf("non-finite round trip of %s: %v, %v", nf, got, err)
	}
	if pts := appendPoints(nil, []model.Point{{T: 1, V: math.NaN()}, {T: 2, V: math.Inf(-1)}}); !json.Valid(pts) {
		t.Fatalf("non-finite points are not strict JSON: %s", pts)
	}
	if got, err := parseMetrics("{}", nil); err != nil || got != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"", "{", `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1}x`, `{"a:1}`, `[]`,
		`{"a":NaN}`, `{"a":Inf}`, `{"a":infinity}`} {
		if _, err := parseMetrics(bad, nil); err == nil {
			t.Errorf("parseMetrics(%q) accepted malformed input", bad)
		}
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add(`{"a":1,"b\u00e9":2.5}`)
	f.Add(`{"x":null,"y":-9e999}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseMetrics(s, nil)
		if err != nil {
			return
		}
		again, err := parseMetrics(string(appendMetrics(nil, m)), nil)
		if err != nil || len(again) != len(m) {
			t.Fatalf("re-encoding %q: %v", s, err)
		}
	})
}

func FuzzParsePoints(f *testing.F) {
	f.Add("[[1,2],[3,4.5]]", 2)
	f.Add("[[1,null]]", 1)
	f.Add("[", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		pts, err := parsePoints(s, n)
		if err != nil {
			return
		}
		again, err := parsePoints(string(appendPoints(nil, pts)), len(pts))
		if err != nil || len(again) != len(pts) {
			t.Fatalf("re-encoding %q: %v", s, err)
		}
	})
}

func TestLoadDatasetEmptyAndMissing(t *testing.T) {
	db, _ := openTemp(t)
	r, _ := mustRunWithCells(t, db, 2)
	ds, err := db.LoadDataset(ctx, r.ID)
	if err != nil || len(ds.Cells) != 2 || len(ds.Samples) != 0 || ds.Run.ID != r.ID {
		t.Fatalf("empty run: %+v, %v", ds, err)
	}
	if _, err := db.LoadDataset(ctx, r.ID+1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
}

// TestLoadWhileWriting loads a run over and over while samples are being
// written: every load must succeed and hold only complete samples.
func TestLoadWhileWriting(t *testing.T) {
	forceParallelLoad(t)
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 3)
	const per = 40
	done := make(chan error, 1)
	go func() {
		for it := 0; it < per; it++ {
			for _, c := range cells {
				s := fullSample(c.ID, it, 50)
				if err := db.InsertSample(ctx, &s); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	loads, last := 0, -1
	for finished := false; !finished; loads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		ds, err := db.LoadDataset(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.Samples) < last {
			t.Fatalf("load %d has %d samples, the one before %d", loads, len(ds.Samples), last)
		}
		last = len(ds.Samples)
		for _, s := range ds.Samples {
			want := fullSample(s.CellID, s.Iteration, 50)
			want.ID = s.ID
			if !reflect.DeepEqual(s, want) {
				t.Fatalf("load %d: sample %d (cell %d iteration %d) is incomplete", loads, s.ID, s.CellID, s.Iteration)
			}
		}
	}
	if last != per*len(cells) {
		t.Fatalf("final load has %d samples, want %d", last, per*len(cells))
	}
	t.Logf("%d loads during the writes", loads)
}

// forceParallelLoad makes LoadDataset split the samples table whatever the
// run's size, for the duration of the test.
func forceParallelLoad(t *testing.T) {
	old := parallelLoadMin
	parallelLoadMin = 1
	t.Cleanup(func() { parallelLoadMin = old })
}

func TestRunPeers(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	r := &model.Run{PlanName: "p", PlanHash: "h", Status: "running"}
	if err := db.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, pv := range [][2]string{{"aioquic", "aioquic 1.7.1"}, {"caddy", "caddy v2.6.2"}, {"aioquic", "aioquic 1.7.2"}, {`we"ird.name`, "x"}} {
		if err := db.SetRunPeer(ctx, r.ID, pv[0], pv[1]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.RunByID(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"aioquic": "aioquic 1.7.2", "caddy": "caddy v2.6.2", `we"ird.name`: "x"}
	if !reflect.DeepEqual(got.Env.Peers, want) {
		t.Errorf("peers %v, want %v", got.Env.Peers, want)
	}
	if err := db.SetRunPeer(ctx, r.ID+1, "x", "y"); !errors.Is(err, ErrNotFound) {
		t.Errorf("peer of a missing run: %v", err)
	}
}

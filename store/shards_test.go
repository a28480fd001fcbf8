package store

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// shardOf is the synthetic partition of the merge tests: block (group g,
// iteration it) -> shard 1..n.
func shardOf(g, it, n int) int { return (g*11+it+1)%n + 1 }

// shardDB writes the database of shard k of n of a synthetic run of 6
// cells (2 groups of 3 protocols, 10 iterations and a warm-up): every
// sample of the shard's blocks, the run's status set to status. edit may
// change the run before it is stored; extra adds samples of other blocks
// (cell index, iteration).
func shardDB(t *testing.T, dir string, k, n int, status string, edit func(*model.Run), extra ...[2]int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("shard-%d-of-%d-%s.db", k, n, strings.ReplaceAll(t.Name(), "/", "_")))
	for i := 0; ; i++ {
		if _, err := os.Stat(path); err != nil {
			break
		}
		path = filepath.Join(dir, fmt.Sprintf("shard-%d-of-%d-%d.db", k, n, i))
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := testRun()
	r.Env.Hostname = fmt.Sprintf("node%d", k)
	if edit != nil {
		edit(&r)
	}
	if err := db.CreateRun(ctx, &r); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunShard(ctx, r.ID, k, n); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRunWarning(ctx, r.ID, fmt.Sprintf("shard %d of %d: only its blocks", k, n)); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRunWarning(ctx, r.ID, "a run warning"); err != nil {
		t.Fatal(err)
	}
	cells := testCells(6)
	if err := db.InsertCells(ctx, r.ID, cells); err != nil {
		t.Fatal(err)
	}
	add := func(ci, it int) {
		s := fullSample(cells[ci].ID, it, 2)
		if err := db.InsertSample(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	for ci := range cells {
		for it := -1; it < 10; it++ {
			if shardOf(ci/3, it, n) == k {
				add(ci, it)
			}
		}
	}
	for _, e := range extra {
		add(e[0], e[1])
	}
	if err := db.UpdateRunStatus(ctx, r.ID, status, r.Started); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunShardRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	r, cells := mustRunWithCells(t, db, 1)
	if k, n, err := db.RunShard(ctx, r.ID); err != nil || k != 0 || n != 0 {
		t.Fatalf("RunShard of a new run = %d/%d, %v; want 0/0", k, n, err)
	}
	for _, bad := range [][2]int{{0, 4}, {5, 4}, {1, 0}, {-1, 2}} {
		if err := db.SetRunShard(ctx, r.ID, bad[0], bad[1]); err == nil {
			t.Errorf("SetRunShard(%d/%d) accepted", bad[0], bad[1])
		}
	}
	if err := db.SetRunShard(ctx, r.ID, 3, 4); err != nil {
		t.Fatal(err)
	}
	if k, n, err := db.RunShard(ctx, r.ID); err != nil || k != 3 || n != 4 {
		t.Fatalf("RunShard = %d/%d, %v; want 3/4", k, n, err)
	}
	s := fullSample(cells[0].ID, 0, 1)
	if err := db.InsertSample(ctx, &s); err != nil {
		t.Fatal(err)
	}
	var shard int
	if err := db.r.QueryRow(`SELECT shard FROM samples WHERE id = ?`, s.ID).Scan(&shard); err != nil || shard != 3 {
		t.Errorf("samples.shard = %d, %v; want 3", shard, err)
	}
}

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	var in []string
	for k := 4; k >= 1; k-- { // any order
		in = append(in, shardDB(t, dir, k, 4, RunComplete, nil))
	}
	out := filepath.Join(dir, "all.db")
	res, err := Merge(ctx, out, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Samples != 6*11 || !slices.Equal(res.Merged, []int{1, 2, 3, 4}) || len(res.Missing) != 0 {
		t.Errorf("result %+v", res)
	}
	db, err := OpenReadOnly(out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ds, err := db.LoadDataset(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Run.Status != RunComplete || ds.Run.Env.Hostname != "node1, node2, node3, node4" {
		t.Errorf("merged run %+v", ds.Run)
	}
	if k, n, _ := db.RunShard(ctx, res.RunID); k != 0 || n != 0 {
		t.Errorf("merged run is shard %d/%d; want a whole run", k, n)
	}
	want := testCells(6)
	if len(ds.Cells) != len(want) {
		t.Fatalf("%d cells", len(ds.Cells))
	}
	idx := map[int64]int{}
	for i, c := range ds.Cells {
		if c.Key != want[i].Key || c.Group != want[i].Group {
			t.Errorf("cell %d: %s, want %s", i, c.Key, want[i].Key)
		}
		idx[c.ID] = i
	}
	// Every sample once, with every field, and its shard.
	shards := map[int64]int{}
	rows, err := db.r.Query(`SELECT id, shard FROM samples`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var k int
		if err := rows.Scan(&id, &k); err != nil {
			t.Fatal(err)
		}
		shards[id] = k
	}
	rows.Close()
	seen := map[[2]int]bool{}
	for _, s := range ds.Samples {
		ci := idx[s.CellID]
		if seen[[2]int{ci, s.Iteration}] {
			t.Errorf("cell %d iteration %d twice", ci, s.Iteration)
		}
		seen[[2]int{ci, s.Iteration}] = true
		if k := shardOf(ci/3, s.Iteration, 4); shards[s.ID] != k {
			t.Errorf("cell %d iteration %d: shard %d, want %d", ci, s.Iteration, shards[s.ID], k)
		}
		w := fullSample(s.CellID, s.Iteration, 2)
		w.ID = s.ID
		// fullSample derives the seed from the cell ID: of the shard's database.
		w.Seed = s.Seed
		if !reflect.DeepEqual(s, w) {
			t.Errorf("merged sample differs:\n got %+v\nwant %+v", s, w)
		}
	}
	if len(seen) != 66 {
		t.Errorf("%d samples, want 66", len(seen))
	}
	infos, err := db.RunShards(ctx, res.RunID)
	if err != nil || len(infos) != 4 {
		t.Fatalf("RunShards = %v, %v", infos, err)
	}
	for i, s := range infos {
		if s.K != i+1 || s.N != 4 || s.Hostname != fmt.Sprintf("node%d", i+1) || s.Status != RunComplete || s.Source == "" {
			t.Errorf("shard info %+v", s)
		}
	}
	warns, _ := db.RunWarnings(ctx, res.RunID)
	if !slices.Contains(warns, "shard 2/4 (node2): a run warning") {
		t.Errorf("run warnings %q lack the shards' own", warns)
	}
	if slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, "only its blocks") }) {
		t.Errorf("run warnings %q keep a shard's note that it is a shard", warns)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
	// The export names each sample's shard and host.
	sm := readCSV(t, exportAll(t, db, FormatCSV, 0)["samples"])
	si, hi, ki, ii := col(t, sm, "shard"), col(t, sm, "host"), col(t, sm, "cell_key"), col(t, sm, "iteration")
	for _, row := range sm.rows {
		ci := slices.IndexFunc(want, func(c model.Cell) bool { return c.Key == row[ki] })
		var it int
		fmt.Sscan(row[ii], &it)
		k := shardOf(ci/3, it, 4)
		if row[si] != fmt.Sprint(k) || row[hi] != fmt.Sprintf("node%d", k) {
			t.Errorf("exported %s #%d: shard %s host %s, want %d node%d", row[ki], it, row[si], row[hi], k, k)
		}
	}
	// The output is never overwritten.
	if _, err := Merge(ctx, out, in, false); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("merging onto an existing file: %v", err)
	}
}

func TestMergeRefuses(t *testing.T) {
	dir := t.TempDir()
	good := func(k int) string { return shardDB(t, dir, k, 4, RunComplete, nil) }
	g1, g2, g3, g4 := good(1), good(2), good(3), good(4)
	whole := filepath.Join(dir, "whole.db")
	{
		db, err := Open(whole)
		if err != nil {
			t.Fatal(err)
		}
		mustRunWithCells(t, db, 6)
		db.Close()
	}
	for _, c := range []struct {
		name string
		in   []string
		want []string
	}{
		{"plan hash", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.PlanHash = "other" })},
			[]string{"plan hash differs", `"other"`, g1}},
		{"plan name", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.PlanName = "other" })},
			[]string{"plan name differs"}},
		{"seed", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.Seed = 7 })},
			[]string{"seed differs", `"7"`}},
		{"version", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.Env.Version = "9.9" })},
			[]string{"quicbench version differs"}},
		{"commit", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.Env.Commit = "def" })},
			[]string{"quicbench commit differs"}},
		{"go", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.Env.GoVersion = "go1.1" })},
			[]string{"Go version differs"}},
		{"quic-go", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, func(r *model.Run) { r.Env.QuicGoVersion = "v0.1" })},
			[]string{"quic-go version differs"}},
		{"duplicate", []string{g1, g2, g3, g3}, []string{"shard 3/4 given twice", g3}},
		{"different N", []string{g1, g2, g3, shardDB(t, dir, 4, 5, RunComplete, nil)}, []string{"shard count N differs", `"4"`, `"5"`}},
		{"overlap", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunComplete, nil, [2]int{0, 0})},
			[]string{"iteration 0 has a sample in both", "overlapping"}},
		{"missing", []string{g1, g2, g4}, []string{"shard 3 of 4 not given", "--partial"}},
		{"missing two", []string{g1, g4}, []string{"shards 2, 3 of 4 not given"}},
		{"incomplete", []string{g1, g2, g3, shardDB(t, dir, 4, 4, RunInterrupted, nil)}, []string{"shard 4/4", "is interrupted", "--partial"}},
		{"not a shard", []string{g1, whole}, []string{"not a shard"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "all.db")
			_, err := Merge(ctx, out, c.in, false)
			if err == nil {
				t.Fatal("merged")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused merge left its output")
			}
		})
	}

	// --partial merges what there is and says what is missing.
	out := filepath.Join(t.TempDir(), "partial.db")
	inc := shardDB(t, dir, 4, 4, RunInterrupted, nil)
	res, err := Merge(ctx, out, []string{g1, g2, inc}, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Complete || !slices.Equal(res.Missing, []int{3}) || !slices.Equal(res.Merged, []int{1, 2, 4}) {
		t.Errorf("partial result %+v", res)
	}
	db, err := OpenReadOnly(out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run, _ := db.RunByID(ctx, res.RunID)
	if run.Status != RunInterrupted {
		t.Errorf("partial merge status %q, want interrupted", run.Status)
	}
	warns, _ := db.RunWarnings(ctx, res.RunID)
	all := strings.Join(warns, "\n")
	for _, w := range []string{"partial merge: shard 3 of 4 missing", "shard 4/4 (" + inc + ") is interrupted"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q lack %q", warns, w)
		}
	}
	// Overlap is refused with --partial too.
	if _, err := Merge(ctx, filepath.Join(t.TempDir(), "x.db"), []string{g1, shardDB(t, dir, 2, 4, RunComplete, nil, [2]int{0, 3})}, true); err == nil || !strings.Contains(err.Error(), "overlapping") {
		t.Errorf("partial merge of overlapping shards: %v", err)
	}
}

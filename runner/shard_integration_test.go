package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// sampleID identifies a sample across databases: cell key and iteration.
type sampleID struct {
	cell string
	it   int
}

// sampleShape is what must be equal between a serial run and its merged
// shards: everything the schedule decides, not what was measured.
type sampleShape struct {
	seed  uint64
	order int
}

func shapes(t *testing.T, ds *model.Dataset) map[sampleID]sampleShape {
	t.Helper()
	keys := map[int64]string{}
	for _, c := range ds.Cells {
		keys[c.ID] = c.Key
	}
	out := map[sampleID]sampleShape{}
	for _, s := range ds.Samples {
		id := sampleID{keys[s.CellID], s.Iteration}
		if _, dup := out[id]; dup {
			t.Fatalf("sample %v stored twice", id)
		}
		out[id] = sampleShape{s.Seed, s.Order}
	}
	return out
}

// TestShardMergeEqualsSerial runs a small plan serially and as 4 shards
// (two of them on 2 testbeds at once, one killed after 3 samples and
// resumed), merges the shards and checks that the merged run is the
// serial one cell for cell: the same cells in the same order, the same
// (cell, iteration) samples with the same seeds and order, and the same
// comparisons with the same numbers of samples. Values differ (timing).
func TestShardMergeEqualsSerial(t *testing.T) {
	needRoot(t)
	p, serial := smallPlanAndDB(t, "serial.db")
	dir := filepath.Dir(serial)
	sum := runPlan(t, p, serial, 0)
	if !sum.Complete {
		t.Fatalf("serial run: %+v", sum)
	}
	exe, _ := os.Executable()
	var shards []string
	planned := 0
	for k := 1; k <= 4; k++ {
		db := filepath.Join(dir, fmt.Sprintf("shard-%d.db", k))
		shards = append(shards, db)
		par := 1
		if k%2 == 0 {
			par = 2
		}
		var log strings.Builder
		opts := runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, Parallel: par, Shard: plan.Shard{K: k, N: 4}}
		if k == 3 {
			// Killed mid-run: stopped after 3 samples, then resumed with
			// its stored identity.
			opts.MaxSamples = 3
			s, err := runner.Run(context.Background(), opts)
			if err != nil {
				t.Fatalf("shard %d: %v\n%s", k, err, log.String())
			}
			if s.Complete || s.Taken != 3 || s.Shard != (plan.Shard{K: 3, N: 4}) {
				t.Fatalf("shard 3 stopped early: %+v", s)
			}
			before := load(t, db)
			if _, err := runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe, Shard: plan.Shard{K: 2, N: 4}}); err == nil || !strings.Contains(err.Error(), "holds shard 3/4") {
				t.Errorf("resuming shard 3 as shard 2: %v", err)
			}
			opts = runner.Options{DB: db, Resume: true, Exe: exe, Progress: &log, Mode: runner.ProgressLines}
			sum, err := runner.Run(context.Background(), opts)
			if err != nil {
				t.Fatalf("shard 3 resumed: %v\n%s", err, log.String())
			}
			if !sum.Complete || sum.Resumed != 3 || sum.Shard.K != 3 {
				t.Fatalf("shard 3 resumed: %+v", sum)
			}
			after := load(t, db)
			for _, s := range before.Samples {
				i := slices.IndexFunc(after.Samples, func(a model.Sample) bool { return a.ID == s.ID })
				if i < 0 || after.Samples[i].Started != s.Started || after.Samples[i].Seed != s.Seed {
					t.Errorf("sample %d stored before the kill was lost or changed by the resume", s.ID)
				}
			}
			shapes(t, after) // no duplicate
			planned += sum.Planned
			continue
		}
		s, err := runner.Run(context.Background(), opts)
		if err != nil {
			t.Fatalf("shard %d: %v\n%s", k, err, log.String())
		}
		if !s.Complete || s.Planned == 0 || s.Planned == sum.Planned {
			t.Fatalf("shard %d: %+v (the whole run plans %d)", k, s, sum.Planned)
		}
		planned += s.Planned
	}
	if planned != sum.Planned {
		t.Errorf("the shards plan %d samples, the serial run %d", planned, sum.Planned)
	}
	// A shard's database stands alone: plan, seed and its identity.
	st, err := store.OpenReadOnly(shards[1])
	if err != nil {
		t.Fatal(err)
	}
	run, _ := st.LatestRun(context.Background())
	k, n, _ := st.RunShard(context.Background(), run.ID)
	warns, _ := st.RunWarnings(context.Background(), run.ID)
	st.Close()
	if k != 2 || n != 4 || run.PlanHash != p.Hash() || run.Seed != p.Seed || !slices.ContainsFunc(warns, func(w string) bool { return strings.HasPrefix(w, "shard 2 of 4") }) {
		t.Errorf("shard 2's run: shard %d/%d, plan %.12s, seed %d, warnings %q", k, n, run.PlanHash, run.Seed, warns)
	}

	merged := filepath.Join(dir, "merged.db")
	res, err := store.Merge(context.Background(), merged, shards, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete {
		t.Errorf("merge: %+v", res)
	}
	a, b := load(t, serial), load(t, merged)
	checkComplete(t, b)
	if len(a.Cells) != len(b.Cells) {
		t.Fatalf("%d cells serially, %d merged", len(a.Cells), len(b.Cells))
	}
	for i := range a.Cells {
		if a.Cells[i].Key != b.Cells[i].Key || a.Cells[i].Group != b.Cells[i].Group {
			t.Errorf("cell %d: %s (%s) serially, %s (%s) merged", i, a.Cells[i].Key, a.Cells[i].Group, b.Cells[i].Key, b.Cells[i].Group)
		}
	}
	sa, sb := shapes(t, a), shapes(t, b)
	if len(sa) != len(sb) {
		t.Errorf("%d samples serially, %d merged", len(sa), len(sb))
	}
	for id, x := range sa {
		if y, ok := sb[id]; !ok || x != y {
			t.Errorf("sample %v: %+v serially, %+v merged (present %v)", id, x, y, ok)
		}
	}
	if a.Run.Seed != b.Run.Seed || a.Run.PlanHash != b.Run.PlanHash {
		t.Errorf("merged run: seed %d plan %.12s; serial: seed %d plan %.12s", b.Run.Seed, b.Run.PlanHash, a.Run.Seed, a.Run.PlanHash)
	}
	// The report's comparisons: the same groups and cells, the same N.
	xa, err := stats.Analyze(a, stats.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	xb, err := stats.Analyze(b, stats.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	describe := func(x *stats.Analysis) []string {
		var out []string
		for _, c := range x.Comparisons {
			na, nb := len(c.A.Samples)+len(c.A.Failed), len(c.B.Samples)+len(c.B.Failed)
			out = append(out, fmt.Sprintf("%s: %s (n=%d) vs %s (n=%d)", c.A.Cell.Group, c.A.Cell.Protocol, na, c.B.Cell.Protocol, nb))
		}
		return out
	}
	if da, db := describe(xa), describe(xb); !slices.Equal(da, db) || len(da) == 0 {
		t.Errorf("comparisons differ:\nserial %q\nmerged %q", da, db)
	}
	// Each merged sample records its shard, and the shards where they ran.
	mdb, err := store.OpenReadOnly(merged)
	if err != nil {
		t.Fatal(err)
	}
	defer mdb.Close()
	infos, err := mdb.RunShards(context.Background(), b.Run.ID)
	if err != nil || len(infos) != 4 {
		t.Fatalf("RunShards: %v, %v", infos, err)
	}
	total := 0
	for _, i := range infos {
		total += i.Samples
		if i.Hostname == "" || i.Kernel == "" || i.Status != "complete" {
			t.Errorf("shard info %+v", i)
		}
	}
	if total != len(b.Samples) {
		t.Errorf("the shards' sample counts add up to %d, %d merged", total, len(b.Samples))
	}

	// A partial merge names the missing shards, and resuming it takes
	// their samples as a whole run would.
	part := filepath.Join(dir, "partial.db")
	res, err = store.Merge(context.Background(), part, shards[:2], true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Complete || !slices.Equal(res.Missing, []int{3, 4}) {
		t.Errorf("partial merge: %+v", res)
	}
	pd := load(t, part)
	if pd.Run.Status != "interrupted" {
		t.Errorf("partial merge status %q", pd.Run.Status)
	}
	var log strings.Builder
	if _, err := runner.Run(context.Background(), runner.Options{DB: part, Resume: true, Exe: exe, Progress: &log, Mode: runner.ProgressLines, Parallel: 2}); err != nil {
		t.Fatalf("resuming the partial merge: %v\n%s", err, log.String())
	}
	pd = load(t, part)
	checkComplete(t, pd)
	sp := shapes(t, pd)
	for id, x := range sa {
		if y := sp[id]; x != y {
			t.Errorf("sample %v: %+v serially, %+v in the resumed partial merge", id, x, y)
		}
	}
}

// TestShardRefusals: what runner.Run refuses before building a testbed.
func TestShardRefusals(t *testing.T) {
	p, db := smallPlanAndDB(t, "a.db")
	exe, _ := os.Executable()
	ad, err := p.WithPrecision(5, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), runner.Options{Plan: ad, DB: db, Exe: exe, Shard: plan.Shard{K: 1, N: 2}})
	if err == nil || !strings.Contains(err.Error(), "precision target") {
		t.Errorf("adaptive plan sharded: %v", err)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused shard created its database")
	}
	_, err = runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Shard: plan.Shard{K: 3, N: 2}})
	if err == nil || !strings.Contains(err.Error(), "3/2") {
		t.Errorf("shard 3/2: %v", err)
	}
}

// TestEmptyShard: a shard that gets no block (more shards than blocks)
// completes at once, with nothing planned and no testbed built, and
// merges like any other.
func TestEmptyShard(t *testing.T) {
	p, db := smallPlanAndDB(t, "empty.db")
	blocks, err := p.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	n := len(blocks) + 1
	exe, _ := os.Executable()
	sum, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Shard: plan.Shard{K: n, N: n}})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.Planned != 0 || sum.Taken != 0 {
		t.Fatalf("empty shard: %+v", sum)
	}
	ds := load(t, db)
	if ds.Run.Status != "complete" || len(ds.Samples) != 0 || len(ds.Cells) == 0 {
		t.Errorf("empty shard stored: status %s, %d samples, %d cells", ds.Run.Status, len(ds.Samples), len(ds.Cells))
	}
	res, err := store.Merge(context.Background(), filepath.Join(filepath.Dir(db), "m.db"), []string{db}, true)
	if err != nil || res.Samples != 0 || len(res.Missing) != n-1 {
		t.Errorf("merging the empty shard: %+v, %v", res, err)
	}
}

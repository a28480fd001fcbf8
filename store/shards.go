package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// SetRunShard records that the run is shard k (1..n) of a run cut into n
// shards (quicbench run --shard K/N); k = n = 0 is a whole run. Samples
// stored afterwards record k as their shard (samples.shard).
func (db *DB) SetRunShard(ctx context.Context, runID int64, k, n int) error {
	if (k == 0) != (n == 0) || k < 0 || k > n {
		return fmt.Errorf("store: run %d: shard %d/%d is not a shard (want 1 <= K <= N, or 0/0)", runID, k, n)
	}
	return db.updateRun(ctx, runID, "setting the shard of", `UPDATE runs SET shard_k = ?, shard_n = ? WHERE id = ?`, k, n)
}

// RunShard returns the shard a run is (SetRunShard): k of n, or 0 of 0
// for a whole run (and for a merged run, whose shards RunShards lists).
func (db *DB) RunShard(ctx context.Context, runID int64) (k, n int, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT shard_k, shard_n FROM runs WHERE id = ?`, runID).Scan(&k, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return k, n, err
}

// ShardInfo is one shard a merged run was made of (table run_shards):
// which, from which file, how far it got and where it ran.
type ShardInfo struct {
	K, N              int
	Source            string // the shard's database as given to Merge
	Status            string // the shard run's status
	Started, Finished time.Time
	Samples           int // samples merged from it
	Hostname, Kernel  string
	CPUModel          string
	CPUs, Parallel    int
}

// RunShards returns the shards a merged run was made of, by K (none for
// a run that was not merged).
func (db *DB) RunShards(ctx context.Context, runID int64) ([]ShardInfo, error) {
	return queryAll(ctx, db.r, func(s rowScanner) (ShardInfo, error) {
		var (
			i                 ShardInfo
			started, finished sql.NullInt64
		)
		err := s.Scan(&i.K, &i.N, &i.Source, &i.Status, &started, &finished, &i.Samples, &i.Hostname, &i.Kernel, &i.CPUModel, &i.CPUs, &i.Parallel)
		i.Started, i.Finished = nsToTime(started), nsToTime(finished)
		return i, err
	}, `SELECT shard_k, shard_n, source, status, started_ns, finished_ns, samples, hostname, kernel, cpu_model, cpus, parallel
		FROM run_shards WHERE run_id = ? ORDER BY shard_k`, runID)
}

// MergeResult is what Merge wrote.
type MergeResult struct {
	RunID    int64
	N        int   // shards the run was cut into
	Merged   []int // the shards merged, ascending
	Missing  []int // the shards not given (only with partial)
	Samples  int
	Complete bool // every shard given and complete: the merged run is complete
	Warnings []string
}

// shardInput is one shard database opened for merging.
type shardInput struct {
	path  string
	db    *DB
	run   model.Run
	k, n  int
	par   int
	brows string
	ds    *model.Dataset
	warns []string
}

// Merge combines the databases of the shards of one run (quicbench run
// --shard K/N, one database each) into a new database out, as one run:
// the plan's cells once (matched across the inputs by key), every
// sample with the shard that took it (samples.shard) and, per shard, where
// it ran (run_shards). It refuses, naming the field and the two files:
// an input that is not a shard or holds more than one run; shards of
// different plans (name, plan hash), seeds, shard counts, quicbench
// version or commit, Go or quic-go version, or browser; two inputs of the
// same shard; a sample (cell key and iteration) in two inputs; and, unless
// partial, a shard not given or a shard run that is not complete. The
// kernel, CPU and host may differ (shards run on different nodes): each
// shard's are recorded in run_shards, and a run warning says when they
// differ. With partial, the missing and incomplete shards are named in
// run warnings, and the merged run is complete only when every shard was
// given and complete (else interrupted: quicbench run --resume on the
// merged file takes the missing samples on one machine). out must not
// exist.
func Merge(ctx context.Context, out string, inputs []string, partial bool) (res *MergeResult, err error) {
	if len(inputs) == 0 {
		return nil, errors.New("merge: no shard databases given")
	}
	if _, err := os.Stat(out); err == nil {
		return nil, fmt.Errorf("merge: %s already exists: choose another output file", out)
	}
	var ins []*shardInput
	defer func() {
		for _, in := range ins {
			in.db.Close()
		}
	}()
	for _, p := range inputs {
		in, err := openShard(ctx, p)
		if err != nil {
			return nil, err
		}
		ins = append(ins, in)
	}
	res = &MergeResult{N: ins[0].n}
	if err := checkShards(ins, partial, res); err != nil {
		return nil, err
	}
	for _, in := range ins {
		if in.ds, err = in.db.LoadDataset(ctx, in.run.ID); err != nil {
			return nil, fmt.Errorf("merge: %s: %w", in.path, err)
		}
		if in.warns, err = in.db.RunWarnings(ctx, in.run.ID); err != nil {
			return nil, fmt.Errorf("merge: %s: %w", in.path, err)
		}
	}
	if err := checkCellsAndOverlap(ins); err != nil {
		return nil, err
	}
	if err := writeMerged(ctx, out, ins, res); err != nil {
		os.Remove(out)
		os.Remove(out + "-wal")
		os.Remove(out + "-shm")
		return nil, err
	}
	return res, nil
}

// openShard opens one input of Merge read-only and reads its run.
func openShard(ctx context.Context, path string) (*shardInput, error) {
	db, err := OpenReadOnly(path)
	if err != nil {
		return nil, fmt.Errorf("merge: %s: %w", path, err)
	}
	in := &shardInput{path: path, db: db}
	fail := func(err error) (*shardInput, error) {
		db.Close()
		return nil, fmt.Errorf("merge: %s: %w", path, err)
	}
	runs, err := db.Runs(ctx)
	if err != nil {
		return fail(err)
	}
	if len(runs) != 1 {
		return fail(fmt.Errorf("holds %d runs; a shard's database holds exactly one", len(runs)))
	}
	in.run = runs[0]
	if in.k, in.n, err = db.RunShard(ctx, in.run.ID); err != nil {
		return fail(err)
	}
	if in.n == 0 {
		return fail(errors.New("not a shard (its run was not started with quicbench run --shard K/N)"))
	}
	if in.par, err = db.RunParallel(ctx, in.run.ID); err != nil {
		return fail(err)
	}
	if in.brows, err = db.RunBrowser(ctx, in.run.ID); err != nil {
		return fail(err)
	}
	return in, nil
}

// checkShards refuses inputs that are not shards of one run, and names
// the missing and incomplete ones (refused unless partial).
func checkShards(ins []*shardInput, partial bool, res *MergeResult) error {
	a := ins[0]
	type field struct {
		what string
		get  func(*shardInput) string
	}
	fields := []field{
		{"shard count N", func(i *shardInput) string { return fmt.Sprint(i.n) }},
		{"plan name", func(i *shardInput) string { return i.run.PlanName }},
		{"plan hash", func(i *shardInput) string { return i.run.PlanHash }},
		{"seed", func(i *shardInput) string { return fmt.Sprint(i.run.Seed) }},
		{"quicbench version", func(i *shardInput) string { return i.run.Env.Version }},
		{"quicbench commit", func(i *shardInput) string { return i.run.Env.Commit }},
		{"Go version", func(i *shardInput) string { return i.run.Env.GoVersion }},
		{"quic-go version", func(i *shardInput) string { return i.run.Env.QuicGoVersion }},
	}
	for _, b := range ins[1:] {
		for _, f := range fields {
			if va, vb := f.get(a), f.get(b); va != vb {
				return fmt.Errorf("merge: the %s differs: %q in %s (shard %d/%d), %q in %s (shard %d/%d): not shards of one run", f.what, va, a.path, a.k, a.n, vb, b.path, b.k, b.n)
			}
		}
	}
	// The browser: shards without browser samples record none.
	var browserOf *shardInput
	for _, b := range ins {
		if b.brows == "" {
			continue
		}
		if browserOf != nil && browserOf.brows != b.brows {
			return fmt.Errorf("merge: the browser differs: %q in %s, %q in %s: samples would not be comparable", browserOf.brows, browserOf.path, b.brows, b.path)
		}
		browserOf = b
	}
	// The peers: every shard that used one must have used the same version.
	peerOf := map[string]*shardInput{}
	for _, b := range ins {
		for name, v := range b.run.Env.Peers {
			if o, seen := peerOf[name]; seen && o.run.Env.Peers[name] != v {
				return fmt.Errorf("merge: the %s version differs: %q in %s, %q in %s: samples would not be comparable", name, o.run.Env.Peers[name], o.path, v, b.path)
			}
			peerOf[name] = b
		}
	}
	byK := map[int]*shardInput{}
	for _, b := range ins {
		if o, dup := byK[b.k]; dup {
			return fmt.Errorf("merge: shard %d/%d given twice: %s and %s", b.k, b.n, o.path, b.path)
		}
		byK[b.k] = b
	}
	slices.SortFunc(ins, func(x, y *shardInput) int { return x.k - y.k })
	for _, b := range ins {
		res.Merged = append(res.Merged, b.k)
	}
	for k := 1; k <= a.n; k++ {
		if byK[k] == nil {
			res.Missing = append(res.Missing, k)
		}
	}
	var incomplete []string
	for _, b := range ins {
		if b.run.Status != RunComplete {
			incomplete = append(incomplete, fmt.Sprintf("shard %d/%d (%s) is %s", b.k, b.n, b.path, b.run.Status))
		}
	}
	if !partial {
		if len(res.Missing) > 0 {
			return fmt.Errorf("merge: %s of %d not given; merge what there is with --partial", shardList(res.Missing), a.n)
		}
		if len(incomplete) > 0 {
			return fmt.Errorf("merge: %s: resume it (quicbench run --resume FILE), or merge what there is with --partial", strings.Join(incomplete, "; "))
		}
	}
	res.Complete = len(res.Missing) == 0 && len(incomplete) == 0
	if len(res.Missing) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("partial merge: %s of %d missing: their blocks have no samples", shardList(res.Missing), a.n))
	}
	for _, s := range incomplete {
		res.Warnings = append(res.Warnings, "partial merge: "+s+": some of its blocks have no samples")
	}
	return nil
}

// shardList names shards: "shard 3" or "shards 2, 4".
func shardList(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprint(k)
	}
	if len(ks) == 1 {
		return "shard " + s[0]
	}
	return "shards " + strings.Join(s, ", ")
}

// checkCellsAndOverlap refuses inputs whose cells differ, and a sample
// (cell key and iteration) in two inputs.
func checkCellsAndOverlap(ins []*shardInput) error {
	a := ins[0]
	for _, b := range ins[1:] {
		if len(a.ds.Cells) != len(b.ds.Cells) {
			return fmt.Errorf("merge: %s has %d cells, %s has %d: not shards of one run", a.path, len(a.ds.Cells), b.path, len(b.ds.Cells))
		}
		for i := range a.ds.Cells {
			if d := cellDiff(a.ds.Cells[i], b.ds.Cells[i]); d != "" || a.ds.Cells[i].Key != b.ds.Cells[i].Key {
				return fmt.Errorf("merge: cell %d differs between %s (%s) and %s (%s): %s", i+1, a.path, a.ds.Cells[i].Key, b.path, b.ds.Cells[i].Key, d)
			}
		}
	}
	type sampleKey struct {
		cell string
		it   int
	}
	owner := map[sampleKey]*shardInput{}
	for _, in := range ins {
		keyOf := make(map[int64]string, len(in.ds.Cells))
		for _, c := range in.ds.Cells {
			keyOf[c.ID] = c.Key
		}
		for _, s := range in.ds.Samples {
			k := sampleKey{keyOf[s.CellID], s.Iteration}
			if o := owner[k]; o != nil {
				return fmt.Errorf("merge: cell %s iteration %d has a sample in both %s (shard %d/%d) and %s (shard %d/%d): overlapping shards", k.cell, k.it, o.path, o.k, o.n, in.path, in.k, in.n)
			}
			owner[k] = in
		}
	}
	return nil
}

// distinct joins the distinct values in order of appearance.
func distinct(vals []string) string {
	var out []string
	for _, v := range vals {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

// writeMerged creates out and writes the merged run.
func writeMerged(ctx context.Context, out string, ins []*shardInput, res *MergeResult) error {
	db, err := Open(out)
	if err != nil {
		return err
	}
	defer db.Close()
	a := ins[0]
	run := a.run
	run.ID = 0
	var hosts, kernels, cpus []string
	for _, in := range ins {
		hosts = append(hosts, in.run.Env.Hostname)
		kernels = append(kernels, in.run.Env.Kernel)
		cpus = append(cpus, in.run.Env.CPUModel)
		if !in.run.Started.IsZero() && (run.Started.IsZero() || in.run.Started.Before(run.Started)) {
			run.Started = in.run.Started
		}
	}
	run.Env.Hostname, run.Env.Kernel, run.Env.CPUModel = distinct(hosts), distinct(kernels), distinct(cpus)
	run.Status, run.Finished = RunInterrupted, time.Time{}
	if res.Complete {
		run.Status = RunComplete
		for _, in := range ins {
			if in.run.Finished.After(run.Finished) {
				run.Finished = in.run.Finished
			}
		}
	}
	if err := db.CreateRun(ctx, &run); err != nil {
		return err
	}
	res.RunID = run.ID
	warn := func(msg string) error { return db.AddRunWarning(ctx, run.ID, msg) }
	if err := warn(fmt.Sprintf("merged from %d of %d shards (%s)", len(ins), a.n, shardList(res.Merged))); err != nil {
		return err
	}
	for _, w := range res.Warnings {
		if err := warn(w); err != nil {
			return err
		}
	}
	for _, f := range []struct{ what, v string }{{"hosts", run.Env.Hostname}, {"kernels", run.Env.Kernel}, {"CPU models", run.Env.CPUModel}} {
		if strings.Contains(f.v, ", ") {
			if err := warn(fmt.Sprintf("the shards ran on different %s (%s): see each sample's shard (run_shards)", f.what, f.v)); err != nil {
				return err
			}
		}
	}
	cells := slices.Clone(a.ds.Cells)
	for i := range cells {
		cells[i].ID = 0
	}
	if err := db.InsertCells(ctx, run.ID, cells); err != nil {
		return err
	}
	idOf := make(map[string]int64, len(cells))
	for _, c := range cells {
		idOf[c.Key] = c.ID
	}
	par, browser := 1, ""
	for _, in := range ins {
		par = max(par, in.par)
		if in.brows != "" {
			browser = in.brows
		}
		prefix := fmt.Sprintf("shard %d/%d (%s): ", in.k, in.n, in.run.Env.Hostname)
		own := fmt.Sprintf("shard %d of %d: ", in.k, in.n) // the runner's note that it is a shard
		for _, w := range in.warns {
			if strings.HasPrefix(w, own) {
				continue
			}
			if err := warn(prefix + w); err != nil {
				return err
			}
		}
		keyOf := make(map[int64]string, len(in.ds.Cells))
		for _, c := range in.ds.Cells {
			keyOf[c.ID] = c.Key
		}
		samples := in.ds.Samples
		sort.SliceStable(samples, func(i, j int) bool { return samples[i].ID < samples[j].ID })
		err := db.withTx(ctx, func(tx *sql.Tx) error {
			for i := range samples {
				s := samples[i]
				s.CellID = idOf[keyOf[s.CellID]]
				id, err := db.insertSample(ctx, tx, &s, in.k)
				if err != nil {
					return fmt.Errorf("merge: %s: %w", in.path, err)
				}
				if err := copyEvidence(ctx, tx, in.db, samples[i].ID, id); err != nil {
					return fmt.Errorf("merge: %s: %w", in.path, err)
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO run_shards (run_id, shard_k, shard_n, source, status, started_ns,
				finished_ns, samples, hostname, kernel, cpu_model, cpus, parallel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, in.k, in.n, in.path, in.run.Status, timeToNS(in.run.Started), timeToNS(in.run.Finished), len(samples),
				in.run.Env.Hostname, in.run.Env.Kernel, in.run.Env.CPUModel, in.run.Env.CPUs, in.par)
			return err
		})
		if err != nil {
			return err
		}
		res.Samples += len(samples)
	}
	if err := db.SetRunParallel(ctx, run.ID, par); err != nil {
		return err
	}
	if browser != "" {
		if err := db.SetRunBrowser(ctx, run.ID, browser); err != nil {
			return err
		}
	}
	for _, in := range ins {
		for _, name := range slices.Sorted(maps.Keys(in.run.Env.Peers)) {
			if err := db.SetRunPeer(ctx, run.ID, name, in.run.Env.Peers[name]); err != nil {
				return err
			}
		}
	}
	return db.IntegrityCheck(ctx)
}

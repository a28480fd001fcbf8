package store

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// oldDatabase writes a database whose schema the first version migrations
// made, holding the rows of src in the columns that schema has.
func oldDatabase(t *testing.T, src string, version int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", version))
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1) // ATTACH is per connection
	all := migrations
	migrations = all[:version]
	err = (&DB{w: raw}).migrate(ctx)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`ATTACH DATABASE ? AS src`, src); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"runs", "cells", "samples", "transport_stats", "timelines", "resources", "warnings"} {
		var cols string
		if err := raw.QueryRow(`SELECT group_concat(name, ', ') FROM pragma_table_info(?)`, table).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO main.` + table + ` (` + cols + `) SELECT ` + cols + ` FROM src.` + table); err != nil {
			t.Fatalf("copying %s: %v", table, err)
		}
	}
	return path
}

// Opening a database of an older schema migrates it: its data load as
// before, the new columns read as their defaults, and new samples store
// every field.
func TestMigrateOlderSchema(t *testing.T) {
	db, srcPath := openTemp(t)
	r, cells := mustRunWithCells(t, db, 1)
	old := fullSample(cells[0].ID, 0, 3)
	if old.Transport[0].CongestionStateChanges == 0 {
		t.Fatal("fullSample has no congestion state changes")
	}
	if err := db.InsertSample(ctx, &old); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunBrowser(ctx, r.ID, "Chrome/156.0.8078.79"); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRunWarning(ctx, r.ID, "run-level warning"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for version := 1; version < len(migrations); version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			mdb, err := OpenExisting(oldDatabase(t, srcPath, version))
			if err != nil {
				t.Fatal(err)
			}
			defer mdb.Close()
			if v, err := mdb.Version(ctx); err != nil || v != len(migrations) {
				t.Fatalf("Version after migrating = %d, %v; want %d", v, err, len(migrations))
			}
			if err := mdb.IntegrityCheck(ctx); err != nil {
				t.Fatal(err)
			}

			// What the older schema could hold.
			want := old
			want.Transport = append([]model.TransportStats(nil), old.Transport...)
			wantBrowser := "Chrome/156.0.8078.79"
			if version < 2 {
				wantBrowser = ""
			}
			if version < 4 {
				want.Drain = 0
			}
			if version < 5 {
				want.Prep = 0
			}
			if version < 7 {
				want.Slot, want.Concurrency = 0, 1 // one testbed at a time
			}
			if version < 9 {
				want.LinkUp.DropMTU, want.LinkDown.DropMTU = 0, 0 // no mtu before version 9
			}
			if version < 3 {
				for i := range want.Transport {
					want.Transport[i].CongestionStateChanges = 0
				}
			}
			// Before version 8 every run was a whole run, its samples of no shard.
			if k, n, err := mdb.RunShard(ctx, r.ID); err != nil || k != 0 || n != 0 {
				t.Errorf("RunShard = %d/%d, %v; want 0/0", k, n, err)
			}
			if infos, err := mdb.RunShards(ctx, r.ID); err != nil || len(infos) != 0 {
				t.Errorf("RunShards = %v, %v; want none", infos, err)
			}
			var shard int
			if err := mdb.r.QueryRow(`SELECT shard FROM samples`).Scan(&shard); err != nil || shard != 0 {
				t.Errorf("samples.shard = %d, %v; want 0", shard, err)
			}
			if b, err := mdb.RunBrowser(ctx, r.ID); err != nil || b != wantBrowser {
				t.Errorf("RunBrowser = %q, %v; want %q", b, err, wantBrowser)
			}
			ds, err := mdb.LoadDataset(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Samples) != 1 || !reflect.DeepEqual(ds.Samples[0], want) {
				t.Fatalf("migrated sample:\n got %+v\nwant %+v", ds.Samples, want)
			}
			if !reflect.DeepEqual(ds.Run, r) {
				t.Errorf("migrated run:\n got %+v\nwant %+v", ds.Run, r)
			}

			// A sample written after the migration keeps every field.
			s := fullSample(cells[0].ID, 1, 3)
			if err := mdb.InsertSample(ctx, &s); err != nil {
				t.Fatal(err)
			}
			ds, err = mdb.LoadDataset(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Samples) != 2 || !reflect.DeepEqual(ds.Samples[1], s) {
				t.Fatalf("sample written after migrating:\n got %+v\nwant %+v", ds.Samples, s)
			}
			tr := readCSV(t, exportAll(t, mdb, FormatCSV, 0)["transport"])
			ci := col(t, tr, "congestion_state_changes")
			var got []string
			for _, row := range tr.rows {
				got = append(got, row[ci])
			}
			wantCSC := []string{
				fmt.Sprint(want.Transport[0].CongestionStateChanges), "0",
				fmt.Sprint(s.Transport[0].CongestionStateChanges), "0",
			}
			if strings.Join(got, ",") != strings.Join(wantCSC, ",") {
				t.Errorf("exported congestion_state_changes %v, want %v", got, wantCSC)
			}
			// The overhead and its parts: the older sample's new parts read
			// as 0, the newer sample's as stored.
			sm := readCSV(t, exportAll(t, mdb, FormatCSV, 0)["samples"])
			for _, name := range []string{"overhead_ns", "drain_ns", "prep_ns"} {
				ci := col(t, sm, name)
				if len(sm.rows) != 2 {
					t.Fatalf("%d exported samples, want 2", len(sm.rows))
				}
				field := map[string]func(model.Sample) int64{
					"overhead_ns": func(s model.Sample) int64 { return int64(s.Overhead) },
					"drain_ns":    func(s model.Sample) int64 { return int64(s.Drain) },
					"prep_ns":     func(s model.Sample) int64 { return int64(s.Prep) },
				}[name]
				if got, wantOld, wantNew := sm.rows[0][ci]+","+sm.rows[1][ci], fmt.Sprint(field(want)), fmt.Sprint(field(s)); got != wantOld+","+wantNew {
					t.Errorf("exported %s %s, want %s,%s", name, got, wantOld, wantNew)
				}
			}
		})
	}
}

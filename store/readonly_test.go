package store

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// sameFile fails the test if the file at path no longer holds want, or if a
// journal appeared beside it. A database in WAL mode (wal) has its log and
// shared-memory index opened by any reader; its log must stay empty.
func sameFile(t *testing.T, path string, want []byte, wal bool) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s was written to (%d bytes, was %d)", filepath.Base(path), len(got), len(want))
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		st, err := os.Stat(path + suffix)
		switch {
		case err != nil:
		case wal && suffix == "-shm":
		case wal && suffix == "-wal" && st.Size() == 0:
		default:
			t.Errorf("%s%s (%d bytes) appeared beside the file", filepath.Base(path), suffix, st.Size())
		}
	}
}

// readOnlyDataset reads the bytes of the database at path, then opens it
// read-only and loads run id from it.
func readOnlyDataset(t *testing.T, path string, id int64) ([]byte, *DB, *model.Dataset) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ro.LoadDataset(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return before, ro, ds
}

// A database that is not quicbench's is refused by every kind of open
// without a byte of it changed: in particular not switched to WAL first.
func TestForeignDatabaseLeftUntouched(t *testing.T) {
	path := foreignDatabase(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*DB, error){
		"Open": Open, "OpenExisting": OpenExisting, "OpenReadOnly": OpenReadOnly,
	} {
		if db, err := open(path); err == nil {
			db.Close()
			t.Errorf("%s accepted a foreign database", name)
		} else if !strings.Contains(err.Error(), "not a quicbench database") {
			t.Errorf("%s: %v (want: not a quicbench database)", name, err)
		}
		sameFile(t, path, before, false)
	}
}

// A read-only open reads a current database without writing to it, and
// refuses writes.
func TestOpenReadOnlyWritesNothing(t *testing.T) {
	path, r, cells := closedWithOneSample(t)
	before, ro, ds := readOnlyDataset(t, path, r.ID)
	if len(ds.Samples) != 1 {
		t.Fatalf("read %d samples, want 1", len(ds.Samples))
	}
	s2 := fullSample(cells[0].ID, 1, 3)
	if err := ro.InsertSample(ctx, &s2); err == nil {
		t.Error("InsertSample through a read-only database succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	sameFile(t, path, before, true)

	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "missing.db")); err == nil ||
		!strings.Contains(err.Error(), "no such database file") {
		t.Errorf("OpenReadOnly of a missing file: %v", err)
	}
}

// A database of an older schema is read through a migrated private copy:
// its data load, the file keeps its version and bytes, and the copy is
// gone after Close.
func TestOpenReadOnlyOlderSchema(t *testing.T) {
	srcPath, r, _ := closedWithOneSample(t)
	old := oldDatabase(t, srcPath, 1)
	before, ro, ds := readOnlyDataset(t, old, r.ID)
	if len(ds.Samples) != 1 || ds.Samples[0].Iteration != 0 {
		t.Fatalf("read %+v, want the one sample", ds.Samples)
	}
	tmp := ro.tmpDir
	if tmp == "" {
		t.Fatal("no private copy was made for an older schema")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the private copy %s is still there after Close (%v)", tmp, err)
	}
	sameFile(t, old, before, false)
	chk, err := sql.Open("sqlite", old)
	if err != nil {
		t.Fatal(err)
	}
	defer chk.Close()
	var v int
	if err := chk.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != 1 {
		t.Errorf("the file's schema version is %d (%v) after a read-only open, want 1", v, err)
	}
}

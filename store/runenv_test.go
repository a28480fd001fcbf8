package store

import (
	"errors"
	"reflect"
	"testing"
)

// The environment fields the testbed determines are written after the run
// is created (and again when buffers grow); the others are kept.
func TestUpdateRunEnv(t *testing.T) {
	db, _ := openTemp(t)
	r := testRun()
	r.Env.CCClient, r.Env.CCServer, r.Env.Sysctls = "", "", nil
	if err := db.CreateRun(ctx, &r); err != nil {
		t.Fatal(err)
	}
	env := r.Env
	env.CCClient, env.CCServer = "cubic (per socket)", "cubic (per socket)"
	env.Sysctls = map[string]string{"net.ipv4.tcp_rmem": "4096 131072 25165824"}
	// fields UpdateRunEnv must not touch
	env.Hostname, env.QuicGoVersion = "elsewhere", "v9"
	if err := db.UpdateRunEnv(ctx, r.ID, env); err != nil {
		t.Fatal(err)
	}
	got, err := db.RunByID(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Env
	want.CCClient, want.CCServer, want.Sysctls = env.CCClient, env.CCServer, env.Sysctls
	if !reflect.DeepEqual(got.Env, want) {
		t.Fatalf("after UpdateRunEnv:\n got %+v\nwant %+v", got.Env, want)
	}
	if err := db.UpdateRunEnv(ctx, 999, env); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpdateRunEnv(999): %v", err)
	}
}

func TestRunBrowser(t *testing.T) {
	db, _ := openTemp(t)
	r := mustCreateRun(t, db)
	if b, err := db.RunBrowser(ctx, r.ID); err != nil || b != "" {
		t.Fatalf("RunBrowser of a new run = %q, %v", b, err)
	}
	if err := db.SetRunBrowser(ctx, r.ID, "Chrome/156.0.8078.79"); err != nil {
		t.Fatal(err)
	}
	if b, err := db.RunBrowser(ctx, r.ID); err != nil || b != "Chrome/156.0.8078.79" {
		t.Fatalf("RunBrowser = %q, %v", b, err)
	}
	if err := db.SetRunBrowser(ctx, 999, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetRunBrowser(999): %v", err)
	}
	if _, err := db.RunBrowser(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RunBrowser(999): %v", err)
	}
	runs := readCSV(t, exportAll(t, db, FormatCSV, 0)["runs"])
	if got := runs.rows[0][col(t, runs, "browser")]; got != "Chrome/156.0.8078.79" {
		t.Errorf("exported browser %q", got)
	}
}

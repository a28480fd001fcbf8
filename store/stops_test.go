package store

import (
	"math"
	"reflect"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func TestGroupStops(t *testing.T) {
	db, _ := openTemp(t)
	r := mustCreateRun(t, db)
	if err := db.InsertCells(ctx, r.ID, testCells(2)); err != nil {
		t.Fatal(err)
	}
	a := model.GroupStop{Group: "lossy/ttfb/builtin/cubic", Iterations: 12, Reason: model.StopPrecision, Precision: 4.2, WorstPair: "h3 vs h2"}
	b := model.GroupStop{Group: "clean/ttfb/builtin/cubic", Iterations: 40, Reason: model.StopMaximum, Precision: math.Inf(1), WorstPair: "h2 vs h1"}
	for _, st := range []model.GroupStop{a, b} {
		if err := db.SetGroupStop(ctx, r.ID, st); err != nil {
			t.Fatal(err)
		}
	}
	// a resumed run that decides again replaces the row
	a.Iterations, a.Precision = 13, 3.9
	if err := db.SetGroupStop(ctx, r.ID, a); err != nil {
		t.Fatal(err)
	}
	got, err := db.GroupStops(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []model.GroupStop{b, a}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GroupStops = %+v, want %+v", got, want)
	}
	ds, err := db.LoadDataset(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ds.Stops, got) {
		t.Errorf("LoadDataset's stops %+v, want %+v", ds.Stops, got)
	}
}

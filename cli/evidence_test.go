package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/store"
)

// evidenceDB writes a results database of one run whose first sample
// keeps a capture and a key log, and whose second keeps nothing.
func evidenceDB(t *testing.T) (path string, with, without int64, capture []byte) {
	t.Helper()
	capture = bytes.Repeat([]byte("pcapng bytes "), 200_000) // beyond one stored chunk
	run := model.Run{PlanName: "p", PlanText: "name: p\n", PlanHash: "ab", Seed: 1, Started: time.Unix(1, 0)}
	path = writeResultsDB(t, func(ctx context.Context, db *store.DB) {
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
			s := model.Sample{CellID: c.ID, Status: model.StatusOK, Value: 1, Metrics: map[string]float64{"ttfb_ms": 1}}
			if i == 0 {
				s.Evidence = []model.Evidence{
					{Name: "capture.pcapng", Kind: model.EvidenceCapture, Data: capture},
					{Name: "keys.log", Kind: model.EvidenceKeyLog, Data: []byte("CLIENT_RANDOM 1 2\n")},
				}
			}
			if err := db.InsertSample(ctx, &s); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				with = s.ID
			} else {
				without = s.ID
			}
		}
	})
	return path, with, without, capture
}

func TestEvidenceCommand(t *testing.T) {
	path, with, without, capture := evidenceDB(t)
	code, out, errs := runCLI(t, "evidence", path)
	if code != ExitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, "a/h2") || !strings.Contains(out, "capture.pcapng (2.6 MB), keys.log (18 B)") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	dir := filepath.Join(t.TempDir(), "s")
	code, out, errs = runCLI(t, "evidence", path, "--sample", itoaCLI(with), "-o", dir)
	if code != ExitOK || strings.Count(out, "\n") != 2 {
		t.Fatalf("--sample: exit %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "capture.pcapng")); !bytes.Equal(b, capture) {
		t.Fatal("the capture written differs from the one stored")
	}
	all := filepath.Join(t.TempDir(), "all")
	if code, _, errs := runCLI(t, "evidence", path, "--all", "--run", "1", "-o", all); code != ExitOK {
		t.Fatalf("--all: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(all, "sample-"+itoaCLI(with), "keys.log")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--sample", itoaCLI(without)}, ExitFailure, "has no evidence"},
		{[]string{"--sample", "999"}, ExitUsage, "no sample 999"},
		{[]string{"--sample", "0"}, ExitUsage, "sample IDs are positive"},
		{[]string{"--sample", "1", "--all"}, ExitUsage, "exclude each other"},
		{[]string{"--all", "--run", "7"}, ExitUsage, "no such run"},
	} {
		code, _, errs := runCLI(t, append([]string{"evidence", path}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	if code, _, errs := runCLI(t, "evidence", filepath.Join(t.TempDir(), "missing.db")); code != ExitUsage {
		t.Errorf("missing database: exit %d %s", code, errs)
	}
}

func itoaCLI(n int64) string { return strconv.FormatInt(n, 10) }

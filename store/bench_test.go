package store

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

// BenchmarkInsertSample measures the cost of storing one sample the way the
// runner does (one durable transaction) with a typical 200-point timeline,
// two connections' transport stats, two resources and two warnings. It
// reports ms/sample (wall, including the fsync) and cpu-ms/sample. The
// "normal" variant runs with synchronous=NORMAL, to show what the
// per-commit fsync of synchronous=FULL costs.
func BenchmarkInsertSample(b *testing.B) {
	for _, mode := range []string{"FULL", "NORMAL"} {
		b.Run(strings.ToLower(mode), func(b *testing.B) {
			db, _ := openTemp(b)
			if _, err := db.w.Exec("PRAGMA synchronous = " + mode); err != nil {
				b.Fatal(err)
			}
			run := mustCreateRun(b, db)
			cells := testCells(1)
			if err := db.InsertCells(ctx, run.ID, cells); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			it := 0
			start, cpu0 := time.Now(), cpuTime()
			for b.Loop() {
				s := fullSample(cells[0].ID, it, 200)
				it++
				if err := db.InsertSample(ctx, &s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(it), "ms/sample")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(it), "cpu-ms/sample")
		})
	}
}

// typicalSample is a lean sample as most tests produce it: a handful of
// metrics and one connection's transport stats; every 100th has a warning,
// and with mixed, every 10th has a 200-point timeline and every 10th (others)
// 20 page resources.
func typicalSample(cellID int64, it int, mixed bool) model.Sample {
	s := fullSample(cellID, it, 0)
	s.Metrics = map[string]float64{"goodput_mbps": float64(it), "completion_ms": 1.5 * float64(it),
		"ttfb_ms": 40, "handshake_ms": 41.5, "retransmits": 2, "bytes": 1 << 20}
	s.Transport = s.Transport[:1]
	s.Timelines, s.Resources, s.Warnings = nil, nil, nil
	if it%100 == 7 {
		s.Warnings = []string{"cpu saturated"}
	}
	if mixed {
		switch it % 10 {
		case 3:
			s.Timelines = fullSample(cellID, it, 200).Timelines[:1]
		case 5:
			for i := 0; i < 20; i++ {
				s.Resources = append(s.Resources, model.Resource{Name: fmt.Sprintf("/obj/%d", i),
					Protocol: "h2", Start: int64(i), TTFB: int64(i) + 5, End: int64(i) + 9, Bytes: 10000})
			}
		}
	}
	return s
}

// bulkLoad fills a database with n samples spread over 100 cells, in large
// transactions (benchmark set-up only; the runner uses InsertSample).
func bulkLoad(tb testing.TB, db *DB, n int, mixed bool) int64 {
	run := mustCreateRun(tb, db)
	cells := testCells(100)
	if err := db.InsertCells(ctx, run.ID, cells); err != nil {
		tb.Fatal(err)
	}
	per := n / len(cells)
	for c := range cells {
		err := db.withTx(ctx, func(tx *sql.Tx) error {
			st, err := tx.Prepare(sampleInsertSQL)
			if err != nil {
				return err
			}
			defer st.Close()
			for it := 0; it < per; it++ {
				s := typicalSample(cells[c].ID, it, mixed)
				res, err := st.Exec(sampleArgs(&s, 0)...)
				if err != nil {
					return err
				}
				id, _ := res.LastInsertId()
				if err := db.insertChildren(ctx, tx, run.ID, id, &s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return run.ID
}

func benchLoad(b *testing.B, mixed bool) {
	if testing.Short() {
		b.Skip("builds a 100,000-sample database")
	}
	path := filepath.Join(b.TempDir(), "big.db")
	db, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 := time.Now()
	runID := bulkLoad(b, db, 100_000, mixed)
	b.Logf("built a 100,000-sample database in %v", time.Since(t0).Round(time.Millisecond))
	b.ReportAllocs()
	loads := 0
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		ds, err := db.LoadDataset(ctx, runID)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds.Samples) != 100_000 {
			b.Fatalf("loaded %d samples", len(ds.Samples))
		}
		loads++
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(loads), "s/load")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(loads), "cpu-s/load")
}

// cpuTime is the CPU time (user + system) this process has used: a figure
// that, unlike wall time, does not grow when other work shares the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadDataset100k loads a run of 100,000 lean samples (six
// metrics, one connection's transport stats each). It reports s/load.
func BenchmarkLoadDataset100k(b *testing.B) { benchLoad(b, false) }

// BenchmarkLoadDataset100kMixed is the same with a 200-point timeline on
// every tenth sample and 20 page resources on another tenth.
func BenchmarkLoadDataset100kMixed(b *testing.B) { benchLoad(b, true) }

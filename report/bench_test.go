package report

import (
	"io"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHTML100k measures report generation for a dataset of 100,000
// samples (60 cells of a 5 x 4 grid, three protocols); the target is under
// 10 s on the 2-core CI machine.
func BenchmarkHTML100k(b *testing.B) {
	ds := bigDataset(100_000)
	counted := 0
	for _, s := range ds.Samples {
		if !s.Warmup {
			counted++
		}
	}
	b.Logf("dataset: %d cells, %d samples (%d counted)", len(ds.Cells), len(ds.Samples), counted)
	b.ReportAllocs()
	b.ResetTimer()
	var total, cpu time.Duration
	for b.Loop() {
		start, cpu0 := time.Now(), cpuTime()
		cw := &countWriter{}
		if err := HTML(cw, ds, Options{}); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += cpuTime() - cpu0
		b.ReportMetric(float64(cw.n)/1e6, "MB/report")
	}
	n := float64(b.N)
	b.ReportMetric(total.Seconds()/n, "s/report")
	b.ReportMetric(cpu.Seconds()/n, "cpu-s/report")
	b.Logf("one report of %d samples: %.2f s wall, %.2f s CPU (user+system, all threads)", len(ds.Samples), total.Seconds()/n, cpu.Seconds()/n)
}

// BenchmarkText100k measures the terminal summary of the same dataset.
func BenchmarkText100k(b *testing.B) {
	ds := bigDataset(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Text(io.Discard, ds, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user + system CPU time: on a shared machine it
// shows the work done when the wall time is inflated by other processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

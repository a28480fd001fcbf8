package replay

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
)

// BenchmarkPrepare120x5MB measures what a run does with a recorded page
// before its first sample, on the size the issue names (120 entries, 5
// MB): the server reads the HAR, decodes every body and compresses those
// recorded compressed (Prepare), and the runner reads it again for its
// index and lays the origins out. Target: under 1 s on the reference
// machine (2 cores); the figure is s/prepare.
func BenchmarkPrepare120x5MB(b *testing.B) {
	h, err := sites.BuildPage(sites.PageShape{Name: "bench", Origins: 15, Requests: 120, Bytes: 5_000_000, SharedIPs: 3, Seed: 7})
	if err != nil {
		b.Fatal(err)
	}
	f := filepath.Join(b.TempDir(), "page.har")
	if err := har.WriteFile(f, h); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(f)
	s := h.Summarize()
	b.Logf("HAR: %d entries, %d origins, %d body bytes, %d bytes on disk", s.Served, s.Origins, s.Bytes, st.Size())
	b.ResetTimer()
	var total, cpu time.Duration
	for b.Loop() {
		start, cpu0 := time.Now(), cpuTime()
		// the runner: index and layout
		hr, err := har.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		idx, err := Prepare("p", hr, Options{IndexOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := NewLayout(idx); err != nil {
			b.Fatal(err)
		}
		// the server: bodies decoded and compressed again
		hs, err := har.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Prepare("p", hs, Options{}); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += cpuTime() - cpu0
	}
	// Wall time is the target; the CPU time (of every thread: the
	// compression runs on all CPUs) says what it would be on an idle
	// machine when other work shares this one.
	b.ReportMetric(total.Seconds()/float64(b.N), "s/prepare")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/prepare")
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

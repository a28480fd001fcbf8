package capture

import (
	"bufio"
	"io"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

// processCPUns is the process's CPU time in ns.
func processCPUns() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkWriteRecord measures the capture writer's work per packet: the
// comment, the packet block and its buffered write (to io.Discard: the
// file system's cost is left out). cpu-ns/op is the process's CPU time per
// packet, which a busy machine does not inflate; allocs/op must be 0.
func BenchmarkWriteRecord(b *testing.B) {
	for _, n := range []int{128, 1500} {
		b.Run(map[int]string{128: "headers", 1500: "whole"}[n], func(b *testing.B) {
			r := forward.Record{Verdict: pipeline.Delivered, In: 1_000, At: 26_000_000, Delay: 25_000_000, Len: 1500, Data: make([]byte, n)}
			w := bufio.NewWriterSize(io.Discard, 1<<16)
			var comment, buf []byte
			b.ReportAllocs()
			b.SetBytes(int64(n))
			cpu0 := processCPUns()
			for i := 0; i < b.N; i++ {
				comment = appendComment(comment[:0], &r)
				buf = appendEPB(buf[:0], 1, int64(r.At), r.Len, r.Data, comment)
				w.Write(buf)
			}
			b.ReportMetric(float64(processCPUns()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

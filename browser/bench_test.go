package browser

import (
	"context"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

// BenchmarkLoadCycle measures one full cold sample for a 10-object page on
// loopback, as Load runs it: browser start and attach, page load and
// measurement, Browser.close, process-group kill, reap and profile removal.
// Besides ns/op it reports each phase (start_ms, wall_ms, close_ms) and the
// page's own load event time (load_ms), so that the overhead per sample is
// visible.
func BenchmarkLoadCycle(b *testing.B) {
	requireChromium(b)
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		b.Run(proto, func(b *testing.B) {
			srv := newTestServer(b, serverConfig{objects: 10, altSvc: true})
			opts := Options{URL: srv.url("/"), Protocol: proto, SPKIHash: srv.spki, ProfileDir: b.TempDir()}
			ctx := context.Background()
			b.ReportAllocs()
			var start, wall, closing, load time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				s, err := NewSession(ctx, opts)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				res, err := s.Load(ctx, opts.URL)
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				start += t1.Sub(t0)
				wall += t2.Sub(t1)
				closing += time.Since(t2)
				load += res.Load
				n++
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
			b.ReportMetric(ms(start), "start_ms")
			b.ReportMetric(ms(wall), "wall_ms")
			b.ReportMetric(ms(closing), "close_ms")
			b.ReportMetric(ms(load), "load_ms")
		})
	}
}

// BenchmarkWarmLoad measures one page load in a running Session (warm
// connections, cache off): the per-sample cost when a test keeps the
// browser.
func BenchmarkWarmLoad(b *testing.B) {
	requireChromium(b)
	for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
		b.Run(proto, func(b *testing.B) {
			srv := newTestServer(b, serverConfig{objects: 10, altSvc: true})
			ctx := context.Background()
			s, err := NewSession(ctx, Options{URL: srv.url("/"), Protocol: proto, SPKIHash: srv.spki, ProfileDir: b.TempDir(), DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var load time.Duration
			n := 0
			for b.Loop() {
				res, err := s.Load(ctx, srv.url("/"))
				if err != nil {
					b.Fatal(err)
				}
				load += res.Load
				n++
			}
			b.ReportMetric(float64(load)/float64(time.Millisecond)/float64(n), "load_ms")
		})
	}
}

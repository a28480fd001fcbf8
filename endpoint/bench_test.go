package endpoint

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// BenchmarkGoodput measures loopback goodput per protocol: each iteration
// is one fresh connection downloading 64 MiB (handshake included). It
// reports Mbit/s of body bytes over the measured part and CPU-seconds per
// MB; server and client share this process (so the CPU figure is both
// ends) and the machine's cores. The -noevents variants run QUIC without
// quic-go's event tracing on either end, to show what tracing costs.
func BenchmarkGoodput(b *testing.B) {
	srv, pool := testServer(b, ServerConfig{})
	quiet, qpool := testServer(b, ServerConfig{NoQUICEvents: true})
	const size = 64 << 20
	for _, proto := range append(model.Protocols, "h3-noevents", "quic-noevents") {
		b.Run(proto, func(b *testing.B) {
			var spec FetchSpec
			if p, ok := strings.CutSuffix(proto, "-noevents"); ok {
				spec = specFor(quiet, qpool, p, "/bytes/64MiB")
				spec.NoQUICEvents = true
			} else {
				spec = specFor(srv, pool, proto, "/bytes/64MiB")
			}
			spec.Verify = false
			b.SetBytes(size)
			b.ReportAllocs()
			var ns, cpu int64
			for b.Loop() {
				res, err := Fetch(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				ns += res.MeasureEnd - res.MeasureStart
				cpu += int64(res.CPU.ClientUser + res.CPU.ClientSys)
			}
			b.ReportMetric(float64(b.N)*size*8/(float64(ns)/1e9)/1e6, "Mbit/s")
			b.ReportMetric(float64(cpu)/1e9/(float64(b.N)*size/1e6), "cpu-s/MB")
		})
	}
}

// BenchmarkUploadGoodput is BenchmarkGoodput in the other direction.
func BenchmarkUploadGoodput(b *testing.B) {
	srv, pool := testServer(b, ServerConfig{})
	const size = 64 << 20
	for _, proto := range model.Protocols {
		b.Run(proto, func(b *testing.B) {
			spec := specFor(srv, pool, proto, "/upload")
			spec.Upload = size
			b.SetBytes(size)
			var ns int64
			for b.Loop() {
				res, err := Fetch(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				ns += res.MeasureEnd - res.MeasureStart
			}
			b.ReportMetric(float64(b.N)*size*8/(float64(ns)/1e9)/1e6, "Mbit/s")
		})
	}
}

// BenchmarkEchoLatency measures the request/response time of /echo on a
// warm connection per protocol (sequential requests).
func BenchmarkEchoLatency(b *testing.B) {
	srv, pool := testServer(b, ServerConfig{})
	for _, proto := range model.Protocols {
		b.Run(proto, func(b *testing.B) {
			spec := warmEcho(srv, pool, proto, 200)
			var total, n int64
			for b.Loop() {
				res, err := Fetch(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res.Requests {
					total += r.End - r.Start
					n++
				}
			}
			b.ReportMetric(float64(total)/float64(n)/1e3, "us/request")
		})
	}
}

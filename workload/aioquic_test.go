package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// TestAioquicSamplesUseTheBuiltInMetricCode checks that a client=aioquic
// sample goes through Executor.Aioquic in place of endpoint.Fetch, and that
// its record yields the download metrics, the client's CPU and its
// configuration metrics.
func TestAioquicSamplesUseTheBuiltInMetricCode(t *testing.T) {
	var got endpoint.FetchSpec
	e := &Executor{Clients: map[string]ClientImpl{"aioquic": {Fetch: func(_ context.Context, req Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
		got = spec
		fr := &endpoint.FetchResult{
			Proto: model.ProtoH3, MeasureStart: 0, MeasureEnd: 200e6, Bytes: 1e6,
			Conns:    []endpoint.ConnTiming{{Local: "10.1.1.2:5000", Start: 0, Connected: 20e6, Handshake: 20e6, Transport: model.TransportStats{Kind: "quic", Side: "client"}}},
			Requests: []endpoint.RequestTiming{{Path: spec.Paths[0], Start: 20e6, Sent: 20e6, FirstByte: 40e6, End: 100e6, Bytes: 1e6, Status: 200}},
			CPU:      model.CPUUsage{ClientUser: 300 * time.Millisecond, ClientSys: 100 * time.Millisecond},
		}
		return fr, map[string]float64{"client_rcvbuf_bytes": 8 << 20}, nil
	}}}}
	res := e.Execute(t.Context(), Request{Test: plan.TestDownload, Protocol: model.ProtoH3, Client: "aioquic",
		Params: plan.Params{Size: 1e6}, Target: Target{Host: "10.1.2.2", Port: 4433}})
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if got.Paths[0] != "/bytes/1000000" || got.Proto != model.ProtoH3 {
		t.Fatalf("spec %+v", got)
	}
	if res.Metrics["goodput_mbps"] != 100 || res.Metrics["ttfb_ms"] != 40 || res.Metrics["client_rcvbuf_bytes"] != 8<<20 {
		t.Fatalf("metrics %v", res.Metrics)
	}
	if res.CPU.ClientUser != 300*time.Millisecond || res.CPU.ClientSys != 100*time.Millisecond || res.ClientCPUUnavailable {
		t.Fatalf("CPU %+v", res.CPU)
	}
	if len(res.Transport) != 1 || len(res.Conns) != 1 || res.Conns[0].Addr != "10.1.1.2:5000" {
		t.Fatalf("transport %+v conns %+v", res.Transport, res.Conns)
	}
	for _, req := range []Request{
		{Test: plan.TestHandshake, Protocol: model.ProtoH3, Client: "aioquic"},
		{Test: plan.TestDownload, Protocol: model.ProtoH2, Client: "aioquic"},
	} {
		if res := e.Execute(t.Context(), req); res.Status != model.StatusFailed || !strings.Contains(res.Error, "over h3 only") {
			t.Errorf("%s over %s: %s %s", req.Test, req.Protocol, res.Status, res.Error)
		}
	}
	res = (&Executor{}).Execute(t.Context(), Request{Test: plan.TestDownload, Protocol: model.ProtoH3, Client: "aioquic", Params: plan.Params{Size: 1e6}})
	if res.Status != model.StatusFailed || !strings.Contains(res.Error, "not available in this agent") {
		t.Errorf("without Aioquic: %s %s", res.Status, res.Error)
	}
}

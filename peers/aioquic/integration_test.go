package aioquic_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers/aioquic"
	"github.com/quicbench/quicbench/peers/program"
	"github.com/quicbench/quicbench/runner"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { clitest.Main(m) }

func python(t *testing.T) string {
	t.Helper()
	py, err := aioquic.FindPython()
	if err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
	return py
}

// TestCheckReadsRecoveryState fails when the private attributes of
// aioquic's recovery that the client reads (RTTs, congestion window, PTO
// count, the loss, send and timeout methods it wraps) change: the client
// program's self-check exercises each on a connection in memory.
func TestCheckReadsRecoveryState(t *testing.T) {
	v, err := aioquic.CheckClient(t.Context(), python(t))
	if err != nil {
		t.Fatal(err)
	}
	if v != aioquic.Version {
		t.Fatalf("aioquic %s, want %s", v, aioquic.Version)
	}
}

// runAioquic runs planText with the runner and returns the samples of the
// aioquic client's cells, by test.
func runAioquic(t *testing.T, planText string) map[string][]model.Sample {
	t.Helper()
	python(t)
	r := clitest.RunPlan(t, planText, runner.Options{})
	out := map[string][]model.Sample{}
	for _, s := range r.Of(func(c *model.Cell) bool { return c.Client == "aioquic" }) {
		out[s.Cell.Test] = append(out[s.Cell.Test], s.Sample)
	}
	return out
}

// TestRunWithAioquicClient takes download and latency samples with the
// aioquic client against quicbench's server across an emulated link, as
// quicbench run does: plan, runner, agent, client program, metrics.
func TestRunWithAioquicClient(t *testing.T) {
	got := runAioquic(t, `
name: aioquic
seed: 3
iterations: 2
client: aioquic
protocols: [h3]
timeout: 60s
scenarios:
  - name: short
    link: "delay 5ms"
tests:
  - test: download
    params: {size: 1MB}
  - test: latency
    params: {requests: 5}
`)
	for _, s := range got["download"] {
		if s.Status != model.StatusOK {
			t.Fatalf("download sample %s: %s", s.Status, s.Error)
		}
		if s.Metrics["goodput_mbps"] <= 0 || s.Metrics["bytes"] != 1e6 || s.Value != s.Metrics["goodput_mbps"] {
			t.Errorf("download metrics %v", s.Metrics)
		}
		if s.Negotiated.ALPN != "h3" || s.Negotiated.QUICVersion != "v1" || s.Negotiated.Cipher == "" {
			t.Errorf("negotiated %+v", s.Negotiated)
		}
		var client *model.TransportStats
		for i, tr := range s.Transport {
			if tr.Kind == "quic" && tr.Side == "client" {
				client = &s.Transport[i]
			}
		}
		if client == nil || client.SmoothedRTTms <= 0 || client.MinRTTms <= 0 || client.CwndBytes <= 0 || client.PacketsSent <= 0 || client.CongestionAlgo != "cubic" {
			t.Errorf("no client transport statistics from aioquic's recovery: %+v", s.Transport)
		}
		if s.CPU.ClientUser+s.CPU.ClientSys <= 0 {
			t.Errorf("no client CPU: %+v", s.CPU)
		}
		if s.Metrics["client_rcvbuf_bytes"] < program.DefaultRcvBuf || s.Metrics["client_max_datagram_bytes"] != program.DefaultMaxDatagramSize {
			t.Errorf("client configuration metrics %v", s.Metrics)
		}
		t.Logf("download: %.1f Mbit/s, client CPU %v, warnings %q", s.Value, s.CPU.ClientUser+s.CPU.ClientSys, s.Warnings)
	}
	for _, s := range got["latency"] {
		if s.Status != model.StatusOK {
			t.Fatalf("latency sample %s: %s", s.Status, s.Error)
		}
		if s.Metrics["requests"] != 5 || s.Metrics["latency_ms"] < 10 || s.Metrics["jitter_ms"] < 0 || s.Prep <= 0 {
			t.Errorf("latency metrics %v, prep %v", s.Metrics, s.Prep)
		}
	}
	if len(got["download"]) != 2 || len(got["latency"]) != 2 {
		t.Fatalf("samples %d download, %d latency; want 2 each", len(got["download"]), len(got["latency"]))
	}
}

// TestAioquicReceiverDropsAreWarned leaves the client's UDP receive buffer
// at the kernel's default (208 KiB): the Python receiver cannot keep up with
// quicbench's server on a fast link, the kernel drops datagrams at its
// socket, and the samples must carry the runner's receiver-drop warning.
func TestAioquicReceiverDropsAreWarned(t *testing.T) {
	t.Setenv("QUICBENCH_AIOQUIC_RCVBUF", "default")
	got := runAioquic(t, `
name: aioquic-drops
seed: 3
iterations: 2
client: aioquic
protocols: [h3]
timeout: 60s
scenarios:
  - name: fast
    link: "delay 10ms"
tests:
  - test: download
    params: {size: 10MB}
`)
	warned := 0
	for _, s := range got["download"] {
		if s.Metrics["client_rcvbuf_bytes"] >= program.DefaultRcvBuf {
			t.Fatalf("the receive buffer was raised to %v bytes", s.Metrics["client_rcvbuf_bytes"])
		}
		if slices.ContainsFunc(s.Warnings, func(w string) bool {
			return strings.HasPrefix(w, "client namespace:") && strings.Contains(w, "UdpRcvbufErrors")
		}) {
			warned++
		}
		t.Logf("%s %.1f Mbit/s, warnings %q", s.Status, s.Value, s.Warnings)
	}
	if len(got["download"]) != 2 || warned == 0 {
		t.Fatalf("%d of %d samples warned about receiver drops in the client namespace", warned, len(got["download"]))
	}
}

package runner_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
)

// stackCostPlan is the plan of BenchmarkStackCost: every server of the
// registry that serves downloads, fetched by quicbench's client, and every
// fetch client, fetching from quicbench's server, over the unimpaired
// emulated link, iteration by iteration so that a drifting machine load
// weighs on every stack alike.
func stackCostPlan() string {
	var servers, clients []string
	for _, name := range peers.Servers() {
		s, _ := peers.ServerStack(name)
		if ok, _, _ := peers.Serves(name, "download"); ok && !s.IsCommand() {
			servers = append(servers, name)
		}
	}
	for _, name := range peers.Clients() {
		c, _ := peers.ClientStack(name)
		if name != model.ClientBuiltin && c.Client.Kind == peers.KindFetch && slices.Contains(c.Client.Protocols, model.ProtoH3) {
			clients = append(clients, name)
		}
	}
	return fmt.Sprintf(`
name: stack-cost
seed: 7
iterations: 6
warmup: true
protocols: [h2, h3]
cc: cubic
timeout: 120s
scenarios:
  - name: unimpaired
    link: ""
tests:
  - test: download
    params: {size: 50MB}
    server: [%s]
  - test: download
    params: {size: 50MB}
    protocols: [h3]
    client: [%s]
`, strings.Join(servers, ", "), strings.Join(clients, ", "))
}

// BenchmarkStackCost measures, in one interleaved run, the goodput and the
// CPU time per megabyte of every stack's server (fetched by quicbench's
// client) and of every fetch client (from quicbench's server), downloading
// 50 MB over the unimpaired emulated link with Cubic where the stack can
// select it, and prints each beside quicbench's own (quic-go over h3, Go's
// net/http over h2) as ratios: the figures of docs/performance.md,
// "Stacks". A server's CPU is its process tree's; a client's likewise
// (a program's start included: it is a fresh process per sample). Run with
// -benchtime 1x -v (go test cuts a benchmark's log otherwise).
func BenchmarkStackCost(b *testing.B) {
	testsupport.RequireRoot(b, "needs root")
	for i := 0; i < b.N; i++ {
		p, err := plan.Parse("stack-cost.yaml", []byte(stackCostPlan()))
		if err != nil {
			b.Fatal(err)
		}
		db := filepath.Join(b.TempDir(), "stack-cost.db")
		exe, _ := os.Executable()
		if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &strings.Builder{}, Mode: runner.ProgressLines}); err != nil {
			b.Fatalf("run: %v", err)
		}
		ds := loadB(b, db)
		type key struct{ role, stack, proto string }
		vals := map[key]map[string][]float64{}
		failed := map[key]int{}
		for _, s := range ds.Samples {
			c := cellOf(ds, &s)
			if s.Warmup {
				continue
			}
			k := key{"server", c.ServerImpl(), c.Protocol}
			if c.Client != model.ClientBuiltin {
				k = key{"client", c.Client, c.Protocol}
			}
			if s.Status != model.StatusOK {
				failed[k]++
				continue
			}
			if vals[k] == nil {
				vals[k] = map[string][]float64{}
			}
			for _, m := range []string{"goodput_mbps", "cpu_server_s_per_mb", "cpu_client_s_per_mb"} {
				if v, ok := s.Metrics[m]; ok {
					vals[k][m] = append(vals[k][m], v)
				}
			}
		}
		med := func(k key, m string) float64 {
			if v := vals[k][m]; len(v) > 0 {
				return stats.Median(v)
			}
			return math.NaN()
		}
		var out strings.Builder
		out.WriteString("| role | stack | protocol | goodput Mbit/s | × quicbench | CPU ms/MB (its side) | × quicbench | failed |\n|---|---|---|---|---|---|---|---|\n")
		keys := make([]key, 0, len(vals)+len(failed))
		for k := range vals {
			keys = append(keys, k)
		}
		for k := range failed {
			if vals[k] == nil {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b key) int {
			return strings.Compare(a.role+a.proto+a.stack, b.role+b.proto+b.stack)
		})
		for _, k := range keys {
			cpuMetric, base := "cpu_server_s_per_mb", key{"server", model.ServerQuicbench, k.proto}
			if k.role == "client" {
				cpuMetric, base = "cpu_client_s_per_mb", key{"server", model.ServerQuicbench, k.proto}
			}
			g, cpu := med(k, "goodput_mbps"), med(k, cpuMetric)*1000
			g0, cpu0 := med(base, "goodput_mbps"), med(base, cpuMetric)*1000
			fmt.Fprintf(&out, "| %s | %s | %s | %.0f | %.2f | %.2f | %.2f | %d |\n", k.role, k.stack, k.proto, g, g/g0, cpu, cpu/cpu0, failed[k])
			b.ReportMetric(g/g0, k.role+"-"+k.stack+"-"+k.proto+"-goodput-x")
			b.ReportMetric(cpu/cpu0, k.role+"-"+k.stack+"-"+k.proto+"-cpu-x")
		}
		b.Logf("stack cost, 50 MB downloads over the unimpaired link, medians of 6 iterations (baseline: quicbench's server with its client, same protocol):\n%s", out.String())
	}
}

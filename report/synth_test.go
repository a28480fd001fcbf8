package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/model"
)

// builder assembles a deterministic synthetic dataset for the tests.
type builder struct {
	ds     *model.Dataset
	rng    *rand.Rand
	cellID int64
	sampID int64
}

func newBuilder(seed uint64) *builder {
	start := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	return &builder{rng: rand.New(rand.NewPCG(seed, 99)), ds: &model.Dataset{Run: model.Run{
		ID: 7, PlanName: "study-mix", PlanHash: "9f2c0e1d", Seed: 42, Status: "complete",
		Started: start, Finished: start.Add(42*time.Minute + 17*time.Second),
		PlanText: "name: study-mix\nseed: 42\niterations: 12\nscenarios:\n  - name: loss-2\n    link: loss 2%\n",
		Env: model.Environment{Version: "0.1.0", Commit: "abc1234", GoVersion: "go1.26.8", QuicGoVersion: "v0.65.0",
			Kernel: "6.18.0", CPUModel: "Test CPU @ 2.0GHz", CPUs: 2, Hostname: "lab", CCClient: "cubic", CCServer: "cubic",
			Sysctls: map[string]string{"net.core.rmem_max": "8388608", "net.ipv4.tcp_wmem": "4096 131072 8388608"}},
	}}}
}

type cellSpec struct {
	scenario, test string
	factors        []model.Factor
	metric, unit   string
	higher         bool
	client         string
}

func (b *builder) key(cs cellSpec, proto string) (key, group string) {
	var parts []string
	for _, f := range cs.factors {
		parts = append(parts, f.Name+"="+f.Value)
	}
	client := cs.client
	if client == "" {
		client = model.ClientBuiltin
	}
	mid := cs.scenario + "/" + cs.test
	if len(parts) > 0 {
		mid += "/" + strings.Join(parts, ",")
	}
	return mid + "/" + proto + "/" + client + "/cubic", mid + "/" + client + "/cubic"
}

// add appends one cell of proto with n iterations; value(i) gives the
// primary metric of iteration i (NaN: a failed sample), decorate may edit
// each sample.
func (b *builder) add(cs cellSpec, proto string, n int, value func(i int) float64, decorate func(s *model.Sample)) {
	b.cellID++
	key, group := b.key(cs, proto)
	client := cs.client
	if client == "" {
		client = model.ClientBuiltin
	}
	b.ds.Cells = append(b.ds.Cells, model.Cell{ID: b.cellID, Key: key, Group: group, Scenario: cs.scenario, Test: cs.test,
		Factors: cs.factors, Protocol: proto, Client: client, CC: "cubic", Metric: cs.metric, Unit: cs.unit,
		HigherIsBetter: cs.higher, Iterations: n, Warmup: true})
	for i := -1; i < n; i++ {
		b.sampID++
		s := model.Sample{ID: b.sampID, CellID: b.cellID, Iteration: i, Warmup: i < 0, Seed: uint64(1000 + i),
			Started: b.ds.Run.Started.Add(time.Duration(b.sampID) * time.Second), Wall: time.Second, Status: model.StatusOK,
			Overhead: time.Duration(b.sampID%20+1) * 1700 * time.Microsecond}
		v := value(max(i, 0))
		if math.IsNaN(v) {
			s.Status, s.Error = model.StatusFailed, "timeout after 30s waiting for the response body"
		} else {
			s.Value = v
		}
		s.Metrics = map[string]float64{cs.metric: s.Value}
		kind, algo := "tcp", "cubic"
		if model.IsQUIC(proto) {
			kind, algo = "quic", "reno" // quic-go's NewReno, as a real run records
		}
		s.Transport = []model.TransportStats{{Kind: kind, CongestionAlgo: algo, SmoothedRTTms: 20 + b.rng.Float64()*5,
			MinRTTms: 18, CwndBytes: int64(40000 + b.rng.IntN(20000)), PacketsSent: 900, PacketsLost: int64(b.rng.IntN(20)),
			Retransmits: int64(b.rng.IntN(25)), PTOCount: int64(b.rng.IntN(2))}}
		s.LinkDown = emu.Counters{PacketsIn: 900, PacketsOut: 880, DropLoss: uint64(b.rng.IntN(20)), QueueDelaySumNs: 880 * 150000}
		s.LinkUp = emu.Counters{PacketsIn: 300, PacketsOut: 300}
		s.CPU = model.CPUUsage{ClientUser: 30 * time.Millisecond, ClientSys: 10 * time.Millisecond, ServerUser: 20 * time.Millisecond}
		if decorate != nil {
			decorate(&s)
		}
		b.ds.Samples = append(b.ds.Samples, s)
	}
}

// noise is a per-iteration factor shared by the protocols of one iteration
// (the paired emulator seed), plus a small independent part.
func (b *builder) noise(i int) float64 {
	shared := 1 + 0.08*math.Sin(float64(i)*1.7)
	return shared * (1 + 0.03*b.rng.NormFloat64())
}

// smallDataset is the fixed dataset of the golden, escaping and browser
// tests: every test kind and every figure the report draws.
func smallDataset() *model.Dataset {
	b := newBuilder(1)
	const n = 12
	// download: h3 faster under loss, a tie without
	for _, sc := range []struct {
		name string
		h3   float64
	}{{"baseline", 1.0}, {"loss-2", 0.72}} {
		spec := cellSpec{scenario: sc.name, test: "download", factors: []model.Factor{{Name: "size", Value: "1MB"}}, metric: "time", unit: "ms"}
		b.add(spec, "h2", n, func(i int) float64 {
			if sc.name == "loss-2" && i == 5 {
				return math.NaN()
			}
			return 180 * b.noise(i)
		}, nil)
		b.add(spec, "h3", n, func(i int) float64 { return 180 * sc.h3 * b.noise(i) }, func(s *model.Sample) {
			if s.Iteration == 3 {
				s.Warnings = append(s.Warnings, "CPU saturated: 97% of 2 cores busy during the sample")
			}
		})
	}
	// upload goodput: higher is better, TCP better
	up := cellSpec{scenario: "baseline", test: "upload", factors: []model.Factor{{Name: "size", Value: "10MB"}}, metric: "goodput", unit: "Mbit/s", higher: true}
	b.add(up, "h2", n, func(i int) float64 { return 480 * b.noise(i) }, nil)
	b.add(up, "h3", n, func(i int) float64 { return 350 * b.noise(i) }, nil)
	// page grid: rate x delay, three protocols, with resources
	for _, rate := range []string{"10mbit", "50mbit"} {
		for _, delay := range []string{"9ms", "109ms"} {
			spec := cellSpec{scenario: "grid-" + rate + "-" + delay, test: "page", metric: "plt", unit: "ms",
				factors: []model.Factor{{Name: "rate", Value: rate}, {Name: "delay", Value: delay}, {Name: "objects", Value: "5"}}}
			rtt := 20.0
			if delay == "109ms" {
				rtt = 220
			}
			for _, proto := range []string{"h1", "h2", "h3"} {
				f := map[string]float64{"h1": 4.2, "h2": 3.1, "h3": 2.1}[proto]
				if delay == "9ms" && proto == "h3" {
					f = 3.05 // a tie with h2 on the short path
				}
				if rate == "50mbit" && delay == "9ms" && proto == "h1" {
					f = 3.0
				}
				b.add(spec, proto, 10, func(i int) float64 { return (rtt*f + 40) * b.noise(i) }, func(s *model.Sample) {
					s.Metrics["fcp"] = s.Value * 0.6
					s.Metrics["requests"] = 6
					alpn := map[string]string{"h1": "http/1.1", "h2": "h2", "h3": "h3"}[proto]
					for k := range 6 {
						start := int64(k) * int64(s.Value*1e6/12)
						if k == 0 {
							start = 0
						}
						s.Resources = append(s.Resources, model.Resource{Name: fmt.Sprintf("/page/obj%d.jpg", k), Protocol: alpn,
							Start: start, TTFB: start + int64(rtt*1e6), End: start + int64(rtt*1e6) + int64(s.Value*1e6/8), Bytes: 8192})
					}
					if proto == "h3" && rate == "10mbit" && delay == "109ms" && s.Iteration == 7 {
						s.Status, s.Error = model.StatusInvalid, "resource /page/obj3.jpg used h2, want h3"
					}
				})
			}
		}
	}
	// multiplex with head-of-line timelines
	mux := cellSpec{scenario: "loss-2", test: "multiplex", factors: []model.Factor{{Name: "streams", Value: "4"}}, metric: "span", unit: "ms"}
	for _, proto := range []string{"h2", "h3"} {
		b.add(mux, proto, n, func(i int) float64 { return map[string]float64{"h2": 420, "h3": 330}[proto] * b.noise(i) }, func(s *model.Sample) {
			for st := range 4 {
				se := model.Series{Kind: model.SeriesHOL, Label: fmt.Sprintf("stream %d", st)}
				for bin := range 30 {
					v := 8000.0
					if proto == "h2" && bin >= 10 && bin < 16 { // a stall of every stream
						v = 0
					}
					if proto == "h3" && st == 1 && bin >= 10 && bin < 14 { // only stream 1 stalls
						v = 0
					}
					se.Points = append(se.Points, model.Point{T: int64(bin) * 10e6, V: v})
				}
				s.Timelines = append(s.Timelines, se)
			}
		})
	}
	// streaming inter-arrival
	str := cellSpec{scenario: "loss-2", test: "stream", factors: []model.Factor{{Name: "segments", Value: "20"}}, metric: "p95_interval", unit: "ms"}
	for _, proto := range []string{"h2", "h3"} {
		b.add(str, proto, n, func(i int) float64 { return map[string]float64{"h2": 95, "h3": 62}[proto] * b.noise(i) }, func(s *model.Sample) {
			se := model.Series{Kind: model.SeriesInterval, Label: "0"}
			for k := range 20 {
				v := 50 + 4*b.rng.NormFloat64()
				if k == 9 {
					v = s.Value
				}
				se.Points = append(se.Points, model.Point{T: int64(k+1) * 50e6, V: v})
			}
			s.Timelines = append(s.Timelines, se)
		})
	}
	// CPU over time
	cpu := cellSpec{scenario: "baseline", test: "cpu", factors: []model.Factor{{Name: "size", Value: "700MB"}}, metric: "time", unit: "ms"}
	for _, proto := range []string{"h2", "h3"} {
		b.add(cpu, proto, 4, func(i int) float64 { return map[string]float64{"h2": 6000, "h3": 9500}[proto] * b.noise(i) }, func(s *model.Sample) {
			for _, side := range []string{model.SeriesCPUClient, model.SeriesCPUServer} {
				se := model.Series{Kind: side}
				for k := range 20 {
					u := 0.35
					if proto == "h3" {
						u = 0.9
					}
					if side == model.SeriesCPUServer {
						u *= 0.8
					}
					se.Points = append(se.Points, model.Point{T: int64(k) * 300e6, V: u + 0.02*math.Sin(float64(k))})
				}
				s.Timelines = append(s.Timelines, se)
			}
		})
	}
	return b.ds
}

// bigDataset has about n counted samples over a 5 x 4 grid of three
// protocols (60 cells), with transport statistics on every sample and
// timelines on a few.
func bigDataset(n int) *model.Dataset {
	b := newBuilder(2)
	per := n / 60
	for _, rate := range []string{"2mbit", "10mbit", "50mbit", "100mbit", "1gbit"} {
		for _, size := range []string{"5KB", "500KB", "10MB", "50MB"} {
			spec := cellSpec{scenario: "grid-" + rate + "-" + size, test: "download", metric: "time", unit: "ms",
				factors: []model.Factor{{Name: "rate", Value: rate}, {Name: "size", Value: size}}}
			for k, proto := range []string{"h1", "h2", "h3"} {
				base := 100 + 10*float64(k) + float64(len(rate)*len(size))
				b.add(spec, proto, per, func(i int) float64 {
					if i%997 == 13 {
						return math.NaN()
					}
					return base * b.noise(i) * (1 + 0.2*b.rng.ExpFloat64())
				}, func(s *model.Sample) {
					if s.Iteration < 2 {
						se := model.Series{Kind: model.SeriesCPUClient}
						for k := range 50 {
							se.Points = append(se.Points, model.Point{T: int64(k) * 1e7, V: 0.5})
						}
						s.Timelines = append(s.Timelines, se)
					}
				})
			}
		}
	}
	return b.ds
}

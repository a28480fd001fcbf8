package capture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/capture"
	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
)

// The test binary doubles as the quicbench executable: the benchmark
// starts it as `serve` and `fetch` inside a testbed's namespaces.
const execEnv = "QUICBENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(&cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	}
	os.Setenv(execEnv, "1")
	os.Exit(m.Run())
}

// costMode is one way of running the emulator: without a tap, or with a
// capture of a snap length.
type costMode struct {
	name string
	snap int // 0: no tap
}

// costResult is one transfer's figures.
type costResult struct {
	mbps       float64 // the download's goodput
	fwdCPU     float64 // the forwarding threads' CPU, % of a core over the transfer
	procCPU    float64 // this process's CPU (forwarders, capture writer, runtime), % of a core
	assemble   time.Duration
	fileBytes  int64
	cut, over  uint64
	records    uint64
	transferNs int64
}

// BenchmarkCaptureCost measures what capture: pcap costs the emulator: a
// kernel TCP download (HTTP/1.1 cleartext, quicbench serve and fetch in
// the namespaces, child processes) through "rate R delay 5ms" each way,
// at 100 Mbit/s and 1 Gbit/s, with no tap, a capture of headers (128
// bytes) and one of whole packets. The modes alternate in a shuffled
// order per round, each on a fresh testbed, so that the machine's load
// drifts over all of them alike; the figures are each mode's median and
// its ratio to the no-tap transfer of the same round. One iteration is one
// round; run with -benchtime 5x.
func BenchmarkCaptureCost(b *testing.B) {
	testsupport.RequireRoot(b, "needs root")
	modes := []costMode{{"off", 0}, {"headers", forward.DefaultSnap}, {"whole", 65535}}
	for _, rate := range []struct {
		name string
		link string
		size string
	}{
		{"100mbit", "rate 100mbit delay 5ms", "40MB"},
		{"1gbit", "rate 1gbit delay 5ms", "300MB"},
	} {
		b.Run(rate.name, func(b *testing.B) {
			res := map[string][]costResult{}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < b.N; i++ {
				order := slices.Clone(modes)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, m := range order {
					r, err := costRun(b, rate.link, rate.size, m)
					if err != nil {
						b.Fatalf("%s %s: %v", rate.name, m.name, err)
					}
					res[m.name] = append(res[m.name], r)
				}
			}
			report(b, rate.name, modes, res)
		})
	}
}

// report prints each mode's medians and its ratios to the no-tap run of
// the same round.
func report(b *testing.B, name string, modes []costMode, res map[string][]costResult) {
	off := res["off"]
	for _, m := range modes {
		rs := res[m.name]
		var gp, fwd, proc, rGp, rFwd, rProc []float64
		var cut, over, recs uint64
		var asm time.Duration
		var file int64
		for i, r := range rs {
			gp, fwd, proc = append(gp, r.mbps), append(fwd, r.fwdCPU), append(proc, r.procCPU)
			rGp = append(rGp, r.mbps/off[i].mbps)
			rFwd = append(rFwd, r.fwdCPU/off[i].fwdCPU)
			rProc = append(rProc, r.procCPU/off[i].procCPU)
			cut, over, recs = cut+r.cut, over+r.over, recs+r.records
			asm += r.assemble
			file += r.fileBytes
		}
		b.Logf("%s %-7s goodput %7.1f Mbit/s (x%.3f, %s)  forwarders %5.1f%% of a core (x%.3f, %s)  process %5.1f%% (x%.3f, %s)  records %d, cut %d, over budget %d, pcapng %.1f MB, assembled in %v per run",
			name, m.name, median(gp), median(rGp), span(rGp), median(fwd), median(rFwd), span(rFwd), median(proc), median(rProc), span(rProc),
			recs, cut, over, float64(file)/1e6/float64(len(rs)), (asm / time.Duration(len(rs))).Round(time.Millisecond))
		b.ReportMetric(median(gp), m.name+"-Mbit/s")
		b.ReportMetric(median(rGp), m.name+"-goodput-ratio")
		b.ReportMetric(median(rFwd), m.name+"-fwd-cpu-ratio")
		b.ReportMetric(median(rProc), m.name+"-proc-cpu-ratio")
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func span(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.3f–%.3f", s[0], s[len(s)-1])
}

// costRun takes one download on a fresh testbed in mode m.
func costRun(b *testing.B, link, size string, m costMode) (costResult, error) {
	var r costResult
	l, err := spec.Parse(link)
	if err != nil {
		return r, err
	}
	cfg := netns.Config{Up: l, Down: l, Seed: 1}
	if m.snap > 0 {
		cfg.Tap = &forward.TapOptions{Snap: m.snap}
	}
	tb, err := netns.New(context.Background(), cfg)
	if err != nil {
		return r, err
	}
	defer tb.Close()
	var sess *capture.Session
	dir := b.TempDir()
	if m.snap > 0 {
		if sess, err = capture.Start(tb, capture.Options{Dir: dir}); err != nil {
			return r, err
		}
		defer sess.Close()
	}
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := tb.Command(ctx, netns.Server, exe, "serve", "--host", tb.Addr(netns.Server).String(), "--port", "14433", "--plain-port", "18080")
	srv.Stdout, srv.Stderr = nil, nil
	if err := srv.Start(); err != nil {
		return r, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	url := "http://" + tb.Addr(netns.Server).String() + ":18080/bytes/" + size
	// The server is up once a small fetch succeeds.
	for try := 0; ; try++ {
		if err := tb.Command(ctx, netns.Client, exe, "fetch", "--proto", "h1c", strings.Replace(url, size, "1KB", 1)).Run(); err == nil {
			break
		} else if try == 50 {
			return r, fmt.Errorf("server not up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sess != nil {
		if _, _, err := sess.Begin(18080); err != nil {
			return r, err
		}
	}
	fwd0, proc0 := tb.ForwarderCPU(), processCPU()
	t0 := time.Now()
	out, err := tb.Command(ctx, netns.Client, exe, "fetch", "--proto", "h1c", "--json", url).Output()
	el := time.Since(t0)
	fwd1, proc1 := tb.ForwarderCPU(), processCPU()
	if err != nil {
		return r, fmt.Errorf("fetch: %v", err)
	}
	var fr struct {
		Requests []struct {
			Sent, End, Bytes int64
		} `json:"requests"`
	}
	if err := json.Unmarshal(out, &fr); err != nil || len(fr.Requests) != 1 || fr.Requests[0].End <= fr.Requests[0].Sent {
		return r, fmt.Errorf("fetch output: %v", err)
	}
	q := fr.Requests[0]
	r.transferNs = q.End - q.Sent
	r.mbps = float64(q.Bytes) * 8 / (float64(r.transferNs) / 1e9) / 1e6
	r.fwdCPU = 100 * (fwd1 - fwd0).Seconds() / el.Seconds()
	r.procCPU = 100 * (proc1 - proc0).Seconds() / el.Seconds()
	if sess != nil {
		g, _, _, err := sess.End()
		if err != nil {
			return r, err
		}
		defer g.Remove()
		r.cut, r.over = g.Cut[0]+g.Cut[1], g.Over[0]+g.Over[1]
		r.records = g.Recorded[0] + g.Recorded[1]
		t := time.Now()
		path := filepath.Join(dir, "c.pcapng")
		if err := g.WriteFile(path, g.Info("bench", m.snap, ""), nil); err != nil {
			return r, err
		}
		r.assemble = time.Since(t)
		if st, err := os.Stat(path); err == nil {
			r.fileBytes = st.Size()
		}
		os.Remove(path)
	}
	return r, nil
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

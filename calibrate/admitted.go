package calibrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// Parallel testbeds at the load the admission rule admits (`quicbench
// calibrate --parallel N --admitted`): what the delay precision is while
// a parallel run's testbeds carry the samples the rule lets in beside one
// another, rather than calibrate's own probe load on every testbed.
//
// For each N, RunAdmitted builds N testbeds with the same links. Testbed
// 0 is the probe testbed: it runs the idle probe phase of RunParallel
// (probes both ways at up to 20% of the link's rate and at most
// admittedProbePPS, the veth floor and the machine's timer baseline
// beside it). Each other testbed carries
// one bulk download through its link for the whole phase, alternately
// over QUIC (quicbench's raw protocol over quic-go) and over TLS on TCP,
// from a server process in its server namespace to a client process in
// its client namespace, as a run's samples are taken: a testbed takes
// part while plan.Admission, with this machine's budget and the
// transfers' predicted loads (plan.CellLoad of a download over the link),
// admits it beside those already loaded, so N - 1 testbeds carry load
// only when the rule would run that many such samples at once. The
// result gives the probe testbed's per-packet delay error next to N = 1
// of the same run, the loads predicted and measured (the transfers'
// processes' CPU time times plan.EndpointLoadFactor, as the runner
// measures a sample's load), and what each testbed held: memory, file
// descriptors and threads.

// admittedSize is the size of the download cell whose predicted load
// stands for a loaded testbed's transfer (its CPU per second does not
// depend on the size once the transfer is long).
const admittedSize = "10MB"

// admittedSettle is how long the transfers run before the probes start:
// slow start and the first losses are over.
const admittedSettle = 5 * time.Second

// admittedMargin is how much longer than the probe phase (settling
// included) a transfer lasts, so that the phase ends under load.
const admittedMargin = 3 * time.Second

// admittedProbePPS caps the probe testbed's probes per second and
// direction (at most 20% of a rate limit, as RunParallel's): 1,000 92-byte
// probes a second, 0.74 Mbit/s, about what a link-bound sample sends,
// where an unlimited link would get 10,000.
const admittedProbePPS = 1000

// admittedProtos are the loaded testbeds' transports, in turn, and the
// plan protocols whose download cells predict their loads.
var admittedProtos = []struct{ bulk, proto string }{{protoQUIC, model.ProtoH3}, {protoTLS, model.ProtoH2}}

// AdmittedResult is the delay precision of the probe testbed while the
// others carry the load the admission rule admits.
type AdmittedResult struct {
	// Testbeds is the number built, the probe testbed included; Loaded
	// the ones that carried a transfer (Admitted of the Testbeds - 1
	// offered, in order, by the rule), QUIC and TLS their transports.
	Testbeds int `json:"testbeds"`
	Loaded   int `json:"loaded"`
	QUIC     int `json:"quic"`
	TLS      int `json:"tls"`
	// Budget is plan.LoadBudget of this machine's CPUs; PredictedCPU the
	// sum of the loaded testbeds' predicted loads (plan.CellLoad), in
	// CPUs; MeasuredCPU their measured load: the transfers' client and
	// server processes' CPU time over the time they ran, times
	// plan.EndpointLoadFactor (what the runner would measure).
	Budget       float64 `json:"budget"`
	PredictedCPU float64 `json:"predicted_cpu"`
	MeasuredCPU  float64 `json:"measured_cpu"`
	// GoodputMbps is the loaded testbeds' mean goodput; Errors counts
	// transfers that failed before the phase ended.
	GoodputMbps float64 `json:"goodput_mbps"`
	Errors      int     `json:"errors,omitempty"`
	// Phase is the probe testbed's idle phase, with the machine's figures
	// over it (CPU busy, timer baseline, floor).
	Phase ParallelPhase `json:"phase"`
	// What one testbed holds, from building the N (with the loaded
	// ones' bulk servers): MemPerTestbedMB is the drop of MemAvailable
	// per testbed (kernel and this process; other processes' allocations
	// at the same time count too), BulkServerMB the mean proportional
	// set size of a bulk server process (part of it), FDsPerTestbed and
	// ThreadsPerTestbed this process's open files and threads per testbed.
	MemPerTestbedMB   float64 `json:"mem_per_testbed_mb"`
	BulkServerMB      float64 `json:"bulk_server_mb"`
	FDsPerTestbed     float64 `json:"fds_per_testbed"`
	ThreadsPerTestbed float64 `json:"threads_per_testbed"`
	OK                bool    `json:"ok"`
}

// RunAdmitted measures the delay precision with N testbeds of which up to
// N - 1 carry the load the admission rule admits (see AdmittedResult),
// for each N of ns in turn, and removes every testbed it built. The
// report has Run's header, one AdmittedResult per N and judged figures
// per N (the probe testbed's per-packet error p50 and p99 against
// TolDelayP50 and TolDelayP99). Include 1 in ns for the baseline of the
// same run.
func RunAdmitted(ctx context.Context, cfg Config, ns []int) (*Report, error) {
	if len(ns) == 0 {
		return nil, errors.New("calibrate: no number of parallel testbeds")
	}
	for _, n := range ns {
		if n < 1 || n > MaxParallel {
			return nil, fmt.Errorf("calibrate: %d parallel testbeds: want 1 to %d", n, MaxParallel)
		}
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if cfg.Up.Delay+cfg.Down.Delay < time.Millisecond && cfg.Up.RateBps() == 0 && cfg.Down.RateBps() == 0 {
		return nil, errors.New("calibrate: --admitted needs a link with a rate or a delay: samples over an unlimited link run alone")
	}
	return eachCount(ctx, cfg, ns, runAdmitted, func(rep *Report, res *AdmittedResult) { rep.Admitted = append(rep.Admitted, *res) })
}

// admittedLoads returns the predicted loads of the transfers the loaded
// testbeds would carry, in turn, and how many of n - 1 the admission rule
// admits at once on a machine of cpus CPUs.
func admittedLoads(cfg Config, n, cpus int) (loads []plan.SampleLoad, admitted int, err error) {
	rule := plan.Admission{Slots: n, Budget: plan.LoadBudget(cpus)}
	var running []plan.SampleLoad
	for i := range n - 1 {
		p := admittedProtos[i%len(admittedProtos)]
		c := model.Cell{Key: "calibrate/download/" + p.proto, Test: plan.TestDownload, Protocol: p.proto, Client: model.ClientBuiltin,
			LinkUp: cfg.Up.String(), LinkDown: cfg.Down.String(), Factors: []model.Factor{{Name: "size", Value: admittedSize}}}
		l, err := plan.CellLoad(&c)
		if err != nil {
			return nil, 0, err
		}
		loads = append(loads, l)
		// The probe testbed counts as running: the rule admits beside it.
		if admitted == i && rule.Admit(append(running, plan.SampleLoad{}), l) {
			running = append(running, l)
			admitted++
		}
	}
	return loads, admitted, nil
}

// runAdmitted is one N of RunAdmitted; it adds N's figures and warnings
// to rep.
func runAdmitted(ctx context.Context, cfg Config, n int, rep *Report) (*AdmittedResult, error) {
	progress := cfg.Progress
	say := func(format string, a ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "calibrate: "+format+"\n", a...)
		}
	}
	cfg.Progress = nil
	cpus := runtime.NumCPU()
	loads, admitted, err := admittedLoads(cfg, n, cpus)
	if err != nil {
		return nil, err
	}
	exe := cfg.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the executable to start the transfers with: %w", err)
		}
	}
	res := &AdmittedResult{Testbeds: n, Loaded: admitted, Budget: plan.LoadBudget(cpus)}
	for _, l := range loads[:admitted] {
		res.PredictedCPU += l.CPU
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	say("%d testbeds: building (the admission rule admits %d of %d loaded ones: predicted %.2f CPUs of a budget of %.2f)", n, admitted, n-1, res.PredictedCPU, res.Budget)
	mem0, memErr0 := sysinfo.MemAvailable()
	fd0, th0 := openFiles(), threads()
	runs := make([]*run, 0, n)
	ends := make([]*bulkEnd, 0, n)
	defer func() {
		var wg sync.WaitGroup
		for _, e := range ends {
			wg.Go(func() { _ = e.Close() })
		}
		wg.Wait()
		for _, r := range runs {
			wg.Go(r.close)
		}
		wg.Wait()
	}()
	for i := range n {
		name := fmt.Sprintf("cala%s-%d", hex.EncodeToString(id), i)
		r, err := newRunWith(ctx, cfg, runOptions{name: name, veth: i == 0, timer: i == 0})
		if err != nil {
			return nil, fmt.Errorf("testbed %d of %d: %w", i+1, n, err)
		}
		runs = append(runs, r)
		if i == 0 || i > admitted {
			continue
		}
		e, err := startBulkEnd(ctx, r.tb, exe, cfg.CC)
		if err != nil {
			return nil, fmt.Errorf("testbed %d of %d: %w", i+1, n, err)
		}
		ends = append(ends, e)
	}
	if mem1, err := sysinfo.MemAvailable(); err == nil && memErr0 == nil {
		res.MemPerTestbedMB = float64(mem0-mem1) / float64(n) / (1 << 20)
	}
	res.FDsPerTestbed = float64(openFiles()-fd0) / float64(n)
	res.ThreadsPerTestbed = float64(threads()-th0) / float64(n)
	for _, e := range ends {
		res.BulkServerMB += float64(pss(e.srv.Cmd.Process.Pid)) / (1 << 20) / float64(len(ends))
	}
	rep.Realtime = runs[0].rep.Realtime

	// The transfers: each lasts a little longer than the phase.
	r0 := runs[0]
	r0.maxPPS = admittedProbePPS
	phaseLen := time.Duration(float64(cfg.Packets) / min(probeRatePPS(cfg.Up), probeRatePPS(cfg.Down), admittedProbePPS) * float64(time.Second))
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		goodput float64
		got     int
	)
	srv0 := make([]time.Duration, len(ends))
	for i, e := range ends {
		srv0[i] = procCPU(e.srv.Cmd.Process.Pid)
	}
	kids0 := childrenCPU()
	t0 := time.Now()
	for i, e := range ends {
		p := admittedProtos[i%len(admittedProtos)]
		if p.bulk == protoQUIC {
			res.QUIC++
		} else {
			res.TLS++
		}
		wg.Go(func() {
			bps, err := e.goodput(tctx, p.bulk, admittedSettle+phaseLen+admittedMargin, 0, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				goodput += bps
				got++
			case tctx.Err() == nil:
				res.Errors++
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d testbeds: a %s transfer failed: %v", n, p.bulk, err))
			}
		})
	}
	if len(ends) > 0 {
		say("%d testbeds: %d transfers started (%d QUIC, %d TLS), probes in %v", n, len(ends), res.QUIC, res.TLS, admittedSettle)
		select {
		case <-time.After(admittedSettle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ph, err := parallelPhase(runs[:1], false, say)
	if err != nil {
		return nil, err
	}
	// The transfers' CPU: the clients' once they have ended and been
	// reaped, the servers' meanwhile.
	wg.Wait()
	held := time.Since(t0)
	var srvCPU time.Duration
	for i, e := range ends {
		srvCPU += procCPU(e.srv.Cmd.Process.Pid) - srv0[i]
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ends) > 0 && held > 0 {
		res.MeasuredCPU = plan.MeasuredLoad(model.ClientBuiltin, childrenCPU()-kids0, srvCPU, held)
	}
	if got > 0 {
		res.GoodputMbps = goodput / float64(got) / 1e6
	}
	res.Phase = *ph
	res.OK = ph.OK
	rep.Figures = append(rep.Figures, admittedFigures(res)...)
	for _, w := range r0.rep.Warnings {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d testbeds, probe testbed: %s", n, w))
	}
	return res, nil
}

// admittedFigures are the judged figures of one N.
func admittedFigures(res *AdmittedResult) []Figure {
	ph := &res.Phase
	prefix := fmt.Sprintf("admitted, %d testbeds (%d loaded): per-packet error ", res.Testbeds, res.Loaded)
	note := fmt.Sprintf("load predicted %.2f, measured %.2f CPUs of a budget of %.2f; CPU busy %.0f%%; machine timer held back >150 us %.2f%% of the phase, latest %.0f us; floor p50 %.1f us, p99 %.1f us",
		res.PredictedCPU, res.MeasuredCPU, res.Budget, ph.CPUBusyPercent, ph.MachineHeldBackPercent, ph.MachineLateMaxUs, ph.FloorP50Us, ph.FloorP99Us)
	fig := func(name string, v float64, tol time.Duration, note string) Figure {
		f := judge(Figure{Name: prefix + name, Unit: "us", Configured: ptr(0), Measured: v, Tolerance: delayTol(tol), Note: note}, us(tol))
		if ph.Pooled.Probes == 0 {
			f.Status, f.Note = StatusFail, "no probe was delivered alike by the link and the seeded model"
		}
		return f
	}
	return []Figure{
		fig("p50", ph.Pooled.P50Us, TolDelayP50, fmt.Sprintf("%d probes; %s", ph.Pooled.Probes, note)),
		fig("p99", ph.Pooled.P99Us, TolDelayP99, ""),
	}
}

// openFiles is the number of this process's open file descriptors (-1:
// unknown).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// threads is the number of this process's threads (-1: unknown).
func threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// pss is a process's proportional set size in bytes (0: unknown).
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// procCPU is a running process's user and system CPU time (0: unknown).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(ut+st) * (time.Second / 100)
}

// childrenCPU is the user and system CPU time of this process's reaped
// children.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

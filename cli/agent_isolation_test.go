package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/child"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// isolationBed is a testbed as a run builds it: quicbench's server in the
// server namespace, with its connection log on (serve --conn-log), and the
// client agent in the client namespace, both this test binary acting as
// quicbench. The agent keeps its browsers across samples, as in a run.
type isolationBed struct {
	tb       *netns.Testbed
	target   workload.Target
	agent    *child.Process
	ctl      *control.Client
	connLog  string
	read     int64  // bytes of connLog consumed
	profiles string // the agent's TMPDIR: every browser profile is made there
}

func newIsolationBed(t *testing.T, link string) *isolationBed {
	t.Helper()
	requireRootCLI(t)
	l, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := netns.New(context.Background(), netns.Config{Name: uniqueName("iso"), Up: l, Down: l, Seed: 28})
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() { tb.Close() })
	dir := t.TempDir()
	b := &isolationBed{tb: tb, connLog: filepath.Join(dir, "conns.jsonl"), profiles: filepath.Join(dir, "tmp")}
	if err := os.Mkdir(b.profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), cliExecEnv+"=main", "TMPDIR="+b.profiles)

	host := tb.Addr(netns.Server).String()
	scmd := tb.Command(context.Background(), netns.Server, os.Args[0], "serve", "--control", "--host", host, "--conn-log", b.connLog)
	scmd.Env = env
	srv, err := child.Start(scmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(3 * time.Second) })
	info, err := endpoint.NewControlClient(srv.Stdout, srv.Stdin).Ready()
	if err != nil {
		t.Fatalf("server: %v (%s)", err, srv.Describe())
	}
	b.target = workload.Target{Host: host, Port: info.Port, PlainPort: info.PlainPort, CAPEM: info.CAPEM, SPKI: info.SPKI}

	acmd := tb.Command(context.Background(), netns.Client, os.Args[0], "agent")
	acmd.Env = env
	if b.agent, err = child.Start(acmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.agent.Stop(10 * time.Second) })
	b.ctl = control.NewClient(control.RoleAgent, b.agent.Stdin, b.agent.Stdout)
	return b
}

// run takes one sample in the agent.
func (b *isolationBed) run(t *testing.T, req workload.Request) *workload.Result {
	t.Helper()
	req.Target = b.target
	if req.Timeout == 0 {
		req.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout+90*time.Second)
	defer cancel()
	var res workload.Result
	if err := b.ctl.Call(ctx, control.Run, req, &res); err != nil {
		t.Fatalf("agent: %v (%s)", err, b.agent.Describe())
	}
	return &res
}

// events returns the connection log's events since the last call.
func (b *isolationBed) events(t *testing.T) []endpoint.ConnEvent {
	t.Helper()
	f, err := os.Open(b.connLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(b.read, 0); err != nil {
		t.Fatal(err)
	}
	var out []endpoint.ConnEvent
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a partial line is read next time
		}
		b.read += int64(len(line))
		var e endpoint.ConnEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("connection log: %v: %q", err, line)
		}
		out = append(out, e)
	}
	return out
}

// closedWait bounds the wait, after a sample, for the server to see its
// connections closed: the context's close sends their FIN or
// CONNECTION_CLOSE at once (one link crossing, 5 ms here); a connection
// left to its idle timeout (30 s for QUIC, 2 min for TCP) would still be
// open after it.
const closedWait = 5 * time.Second

// sampleEvents waits until every connection opened since the last call
// has closed (at most closedWait) and returns the events since the last
// call: those of the sample just taken.
func (b *isolationBed) sampleEvents(t *testing.T) []endpoint.ConnEvent {
	t.Helper()
	var all []endpoint.ConnEvent
	deadline := time.Now().Add(closedWait)
	for {
		all = append(all, b.events(t)...)
		if len(openConns(all)) == 0 || time.Now().After(deadline) {
			return all
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openConns are the connections of events that opened and did not close.
func openConns(events []endpoint.ConnEvent) []string {
	open := map[string]bool{}
	for _, e := range events {
		k := e.Kind + " " + e.Remote
		switch e.Event {
		case "open":
			open[k] = true
		case "close":
			delete(open, k)
		}
	}
	var out []string
	for k := range open {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// isolationStep is one sample of the isolation test.
type isolationStep struct {
	test, proto, conn string
}

// checkIsolated checks one sample's result and the server's view of it:
// valid, over the forced protocol; at least one connection, all over that
// protocol, the first with a full TLS handshake (no session resumed, no
// 0-RTT), and every one closed when the sample's context closed (so
// nothing could carry over to the next sample); a cold page load on a new
// connection;
// the browser's and the agent's usage recorded; and the browser kept
// (wantAge: its sample count).
func checkIsolated(t *testing.T, name string, st isolationStep, res *workload.Result, events []endpoint.ConnEvent, wantAge int) {
	t.Helper()
	if res.Status != model.StatusOK {
		t.Errorf("%s: %s: %s", name, res.Status, res.Error)
		return
	}
	alpn := map[string]string{model.ProtoH1: "http/1.1", model.ProtoH2: "h2", model.ProtoH3: "h3"}[st.proto]
	kind := "tcp"
	if st.proto == model.ProtoH3 {
		kind = "quic"
	}
	if res.Negotiated.ALPN != alpn {
		t.Errorf("%s: negotiated %q, want %q", name, res.Negotiated.ALPN, alpn)
	}
	opens := 0
	for _, e := range events {
		if e.Event != "open" {
			continue
		}
		opens++
		if e.Kind != kind || e.ALPN != alpn {
			t.Errorf("%s: the server saw a %s connection with ALPN %q, want %s with %q", name, e.Kind, e.ALPN, kind, alpn)
		}
		// The sample's first connection must make a full handshake: a
		// session ticket kept from an earlier sample would be used at
		// once. Its later connections (h1 opens up to 6) may resume the
		// session that first handshake gave them, as in any page load.
		if opens == 1 && (e.Resumed || e.ZeroRTT) {
			t.Errorf("%s: the server saw the sample's first connection resume a TLS session (%v) or send 0-RTT (%v) from %s: state carried over from an earlier sample", name, e.Resumed, e.ZeroRTT, e.Remote)
		}
	}
	if opens == 0 {
		t.Errorf("%s: the server saw no new connection: the sample reused one of an earlier sample (events %+v)", name, events)
	}
	if left := openConns(events); len(left) > 0 {
		t.Errorf("%s: connections %v still open %v after the sample: its context's close did not close them", name, left, closedWait)
	}
	if st.test == plan.TestPage {
		want := 0.0
		if st.conn == plan.ConnWarm {
			want = 1
		}
		if got := res.Metrics["connection_reused"]; got != want {
			t.Errorf("%s: connection_reused %v, want %v", name, got, want)
		}
	}
	for _, m := range []string{"browser_rss_mb", "browser_pss_mb", "browser_fds", "agent_rss_mb", "agent_fds"} {
		if res.Metrics[m] <= 0 {
			t.Errorf("%s: metric %s = %v (present: %v)", name, m, res.Metrics[m], slices.Sorted(mapsKeys(res.Metrics)))
		}
	}
	if got := res.Metrics["browser_age"]; got != float64(wantAge) {
		t.Errorf("%s: browser_age %v, want %d (a kept browser counts its samples)", name, got, wantAge)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("%s: warnings %q", name, res.Warnings)
	}
	if res.CPU.ClientUser+res.CPU.ClientSys <= 0 {
		t.Errorf("%s: client CPU %+v", name, res.CPU)
	}
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// isolationSteps alternate the protocols, page loads (cold and warm) and
// a bench page sample (ttfb: the document on the browser's first
// connection), so that every sample follows others in the same kept
// browser.
var isolationSteps = []isolationStep{
	{plan.TestPage, model.ProtoH3, plan.ConnCold},
	{plan.TestPage, model.ProtoH2, plan.ConnCold},
	{plan.TestPage, model.ProtoH3, plan.ConnCold},
	{plan.TestTTFB, model.ProtoH3, ""},
	{plan.TestPage, model.ProtoH2, plan.ConnWarm},
	{plan.TestPage, model.ProtoH1, plan.ConnCold},
	{plan.TestPage, model.ProtoH3, plan.ConnWarm},
	{plan.TestTTFB, model.ProtoH2, ""},
	{plan.TestPage, model.ProtoH1, plan.ConnCold},
	{plan.TestPage, model.ProtoH2, plan.ConnCold},
}

func stepRequest(client string, st isolationStep) workload.Request {
	values := map[string]string{}
	if st.test == plan.TestPage {
		values = map[string]string{"objects": "6", "size": "8KB", "connection": st.conn}
	}
	return workload.Request{Test: st.test, Protocol: st.proto, Client: client, Params: testParams(st.test, values)}
}

// TestChromiumIsolation and TestFirefoxIsolation take samples in the
// agent's kept browser across a testbed (5 ms each way) and prove, from
// the server's connection log, that consecutive samples share nothing:
// each opens its own connections with full TLS handshakes (no session
// ticket or 0-RTT carried over), over its forced protocol, and all of
// them are closed when its context closes; the cold loads report a new
// connection, the warm ones the priming load's. Chromium keeps one
// browser per protocol (its switches are process-wide), Firefox one for
// all (its protocol preferences are set per sample). When the agent
// exits, no browser process and no profile is left.
func TestChromiumIsolation(t *testing.T) {
	requireChromiumCLI(t)
	testIsolation(t, "chromium", func(ages map[string]int, proto string) int { ages[proto]++; return ages[proto] })
}

func TestFirefoxIsolation(t *testing.T) {
	requireFirefoxCLI(t)
	testIsolation(t, "firefox", func(ages map[string]int, _ string) int { ages[""]++; return ages[""] })
}

func testIsolation(t *testing.T, client string, age func(ages map[string]int, proto string) int) {
	b := newIsolationBed(t, "delay 5ms")
	ages := map[string]int{}
	for i, st := range isolationSteps {
		name := fmt.Sprintf("#%d %s %s %s", i, st.test, st.proto, st.conn)
		b.events(t) // nothing of an earlier sample may remain: checked by the previous step
		res := b.run(t, stepRequest(client, st))
		events := b.sampleEvents(t)
		checkIsolated(t, name, st, res, events, age(ages, st.proto))
		t.Logf("%s: %s, %d connection events, prep %v, wall %v, browser %.0f MB PSS, %.0f fds", name, res.Status, len(events),
			res.Prep.Round(time.Millisecond), res.Wall.Round(time.Millisecond), res.Metrics["browser_pss_mb"], res.Metrics["browser_fds"])
	}
	b.checkAgentExit(t)
}

// checkAgentExit ends the agent (end of its input, as the runner does)
// and checks that it closed its kept browsers: no process of theirs and
// no profile is left.
func (b *isolationBed) checkAgentExit(t *testing.T) {
	t.Helper()
	b.agent.Stop(30 * time.Second)
	if pids := b.browserGroups(); len(pids) > 0 {
		t.Errorf("browser processes %v left after the agent exited", pids)
	}
	entries, _ := os.ReadDir(b.profiles)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "qb-") {
			t.Errorf("profile %s left after the agent exited", e.Name())
		}
	}
}

// browserGroups returns the process groups of the agent's browsers: the
// live processes whose command line names a profile under the agent's
// TMPDIR, by their group.
func (b *isolationBed) browserGroups() []int {
	var groups []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), b.profiles+"/qb-") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pid && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	return groups
}

// waitOpen waits until the server has seen a connection open (the sample
// in flight reached it) and returns the events read meanwhile.
func (b *isolationBed) waitOpen(t *testing.T) []endpoint.ConnEvent {
	t.Helper()
	var got []endpoint.ConnEvent
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = append(got, b.events(t)...)
		for _, e := range got {
			if e.Event == "open" {
				return got
			}
		}
	}
	t.Fatal("the sample never reached the server")
	return nil
}

// TestChromiumRestarts and TestFirefoxRestarts kill (SIGKILL) and hang
// (SIGSTOP) the agent's kept browser between samples and during one, and
// check that the agent restarts it and that the samples say so: a browser
// that died or does not answer before a sample is replaced, and that
// sample (valid) carries a warning naming why; a browser that dies or
// hangs during a sample fails that sample, whose warning says the browser
// was closed; the next sample runs in a fresh browser (browser_age 1)
// without a warning. A request's memory and open-files limits
// (browser_memory_limit, browser_files_limit) below what the browser
// holds restart it before the sample, with a warning. No browser process or profile is left at the end.
func TestChromiumRestarts(t *testing.T) {
	requireChromiumCLI(t)
	testRestarts(t, "chromium")
}

func TestFirefoxRestarts(t *testing.T) {
	requireFirefoxCLI(t)
	testRestarts(t, "firefox")
}

func testRestarts(t *testing.T, client string) {
	b := newIsolationBed(t, "delay 5ms")
	small := isolationStep{plan.TestPage, model.ProtoH2, plan.ConnCold}
	limited := func(mem int64, files int) func(*workload.Request) {
		return func(r *workload.Request) { r.BrowserMemoryLimit, r.BrowserFileLimit = mem, files }
	}
	sample := func(name string, wantAge int, wantWarning string, with ...func(*workload.Request)) {
		t.Helper()
		req := stepRequest(client, small)
		for _, f := range with {
			f(&req)
		}
		res := b.run(t, req)
		b.sampleEvents(t)
		t.Logf("%s: %s %s; warnings %q; browser_age %v", name, res.Status, res.Error, res.Warnings, res.Metrics["browser_age"])
		if res.Status != model.StatusOK {
			t.Errorf("%s: %s: %s", name, res.Status, res.Error)
		}
		if res.Metrics["browser_age"] != float64(wantAge) {
			t.Errorf("%s: browser_age %v, want %d", name, res.Metrics["browser_age"], wantAge)
		}
		switch {
		case wantWarning == "" && len(res.Warnings) > 0:
			t.Errorf("%s: warnings %q", name, res.Warnings)
		case wantWarning != "" && (len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], wantWarning)):
			t.Errorf("%s: warnings %q, want one containing %q", name, res.Warnings, wantWarning)
		}
	}
	signal := func(sig syscall.Signal, group bool) {
		t.Helper()
		groups := b.browserGroups()
		if len(groups) != 1 {
			t.Fatalf("%d browsers kept (%v), want 1", len(groups), groups)
		}
		pid := groups[0]
		if group {
			pid = -pid
		}
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}

	sample("first", 1, "")
	sample("kept", 2, "")
	signal(syscall.SIGKILL, true)
	sample("after a kill", 1, "browser restarted before the sample: the previous browser had ended")
	signal(syscall.SIGSTOP, false)
	sample("after a stop", 1, "the previous browser did not answer within 3s")
	// The plan's limits reach the agent: every browser holds more than
	// 64 MiB and 64 open files, so each limit restarts it.
	sample("kept again", 2, "")
	sample("over a memory limit", 1, "after 2 samples, over the limit of 64 MB", limited(64<<20, 0))
	sample("kept again", 2, "")
	sample("over an open-files limit", 1, "open files (its ", limited(0, 64))
	sample("under both limits", 2, "", limited(1<<40, 1<<20))

	// During a sample: a page that takes seconds over 1 Mbit/s.
	slow, err := spec.Parse("delay 5ms rate 1mbit")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := spec.Parse("delay 5ms")
	for _, c := range []struct {
		name, want string
		sig        syscall.Signal
	}{
		{"killed during the sample", "browser failed during the sample and was closed: it ended", syscall.SIGKILL},
		{"stopped during the sample", "browser failed during the sample and was closed: it did not answer", syscall.SIGSTOP},
	} {
		if err := b.tb.SetLink(slow, slow, 28); err != nil {
			t.Fatal(err)
		}
		req := workload.Request{Test: plan.TestPage, Protocol: model.ProtoH2, Client: client, Timeout: 8 * time.Second,
			Params: testParams(plan.TestPage, map[string]string{"objects": "10", "size": "100KB"})}
		done := make(chan *workload.Result, 1)
		go func() { done <- b.run(t, req) }()
		b.waitOpen(t)
		signal(c.sig, c.sig == syscall.SIGKILL)
		res := <-done
		t.Logf("%s: %s %s; warnings %q", c.name, res.Status, res.Error, res.Warnings)
		if res.Status != model.StatusFailed || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], c.want) {
			t.Errorf("%s: %s (%s), warnings %q; want failed with a warning containing %q", c.name, res.Status, res.Error, res.Warnings, c.want)
		}
		if err := b.tb.SetLink(fast, fast, 28); err != nil {
			t.Fatal(err)
		}
		b.sampleEvents(t)
		sample("after: "+c.name, 1, "")
	}
	b.checkAgentExit(t)
}

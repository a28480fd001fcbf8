package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
)

func requireRootCLI(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testsupport.Unavailable(t, "needs root (network namespaces)")
	}
}

// tbCLI runs quicbench with args under ctx.
func tbCLI(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Args: args, Getenv: func(string) string { return "" }, Exe: os.Args[0]}
	code = Run(ctx, env)
	return code, out.String(), errb.String()
}

func uniqueName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// qbNamespaces lists the qb- entries under /run/netns.
func qbNamespaces() map[string]bool {
	m := map[string]bool{}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), netns.Prefix) {
			m[e.Name()] = true
		}
	}
	return m
}

func TestTestbedUpExecListDown(t *testing.T) {
	requireRootCLI(t)
	name := uniqueName("cli")
	// Like Main: SIGTERM (sent by testbed down) cancels the context.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	type result struct {
		code        int
		out, errout string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := tbCLI(ctx, "testbed", "up", "--name", name, "--link", "delay 5ms", "--seed", "3", "--json")
		done <- result{c, o, e}
	}()
	var info netns.Info
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if info, err = netns.Lookup(name); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("testbed up exited %d: %s %s", r.code, r.out, r.errout)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("testbed up did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { netns.Down(context.Background(), name) })
	if info.Up != "delay 5ms" || info.Seed != 3 || info.CC != "cubic" {
		t.Fatalf("state %+v", info)
	}

	code, out, errout := tbCLI(context.Background(), "testbed", "exec", "server", "--name", name, "--", "cat", "/proc/net/dev")
	if code != 0 || !strings.Contains(out, netns.DeviceName) {
		t.Fatalf("exec server: %d %q %q", code, out, errout)
	}
	code, out, _ = tbCLI(context.Background(), "testbed", "exec", "client", "--name", name, "--", "sh", "-c", "echo $QUICBENCH_SERVER_ADDR; exit 5")
	if code != 5 || strings.TrimSpace(out) != info.ServerAddr.String() {
		t.Fatalf("exec client: exit %d (want 5), output %q (want %s)", code, out, info.ServerAddr)
	}
	code, _, errout = tbCLI(context.Background(), "testbed", "exec", "router", "--name", name, "--", "true")
	if code != ExitUsage || !strings.Contains(errout, "router") {
		t.Fatalf("exec with a bad side: %d %q", code, errout)
	}
	code, _, errout = tbCLI(context.Background(), "testbed", "exec", "client", "--name", name+"x", "--", "true")
	if code != ExitFailure || !strings.Contains(errout, "no such testbed") {
		t.Fatalf("exec in a missing testbed: %d %q", code, errout)
	}

	code, out, _ = tbCLI(context.Background(), "testbed", "list", "--json")
	var list []testbedJSON
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list: %d %q", code, out)
	}
	found := false
	for _, l := range list {
		found = found || (l.Name == name && l.Alive != nil && *l.Alive && l.ServerAddr == info.ServerAddr.String())
	}
	if !found {
		t.Fatalf("list lacks %s: %s", name, out)
	}

	code, out, errout = tbCLI(context.Background(), "testbed", "down", "--name", name)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("down: %d %q %q", code, out, errout)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("testbed up did not return after testbed down")
	}
	if r.code != 0 {
		t.Fatalf("testbed up exited %d: %s", r.code, r.errout)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	var first, last testbedJSON
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &last) != nil {
		t.Fatalf("testbed up --json printed %q", r.out)
	}
	if first.Event != "up" || first.Name != name || first.Sysctls["net.ipv4.tcp_no_metrics_save"] != "1" || last.Event != "down" || last.UpCount == nil {
		t.Fatalf("events %+v / %+v", first, last)
	}
	requireTestbedGone(t, name, "testbed down")
}

// requireTestbedGone fails t if testbed name left its client namespace or
// its state behind after what.
func requireTestbedGone(t *testing.T, name, what string) {
	t.Helper()
	if qbNamespaces()[netns.Prefix+name+"-c"] {
		t.Fatalf("namespace left after %s", what)
	}
	if _, err := netns.Lookup(name); !errors.Is(err, netns.ErrNotFound) {
		t.Fatalf("state left after %s: %v", what, err)
	}
}

func TestTestbedUpBadSpecCreatesNothing(t *testing.T) {
	requireRootCLI(t)
	before := qbNamespaces()
	name := uniqueName("bad")
	for _, args := range [][]string{
		{"testbed", "up", "--name", name, "--link", "delay -5ms"},
		{"testbed", "up", "--name", name, "--up", "loss 150%"},
		{"testbed", "up", "--name", name, "--down", "rate 0"},
		{"testbed", "up", "--name", name, "--link", "delay 1ms", "--down", "delay 2ms"},
		{"testbed", "up", "--name", name, "--cc", "vegas"},
		{"testbed", "up", "--name", name, "--competing", "udp rate fast"},
		{"testbed", "up", "--name", "bad name"},
		{"testbed", "up", "--name", name, "--down", "trace /nonexistent/quicbench.trace"},
		{"emulate", "--link", "delay -5ms", "--", "true"},
		{"emulate", "--up", "limit", "--", "true"},
	} {
		code, _, errout := tbCLI(context.Background(), args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d (want 2): %s", args, code, errout)
		}
		if !strings.Contains(errout, "quicbench:") {
			t.Errorf("%q: no error message: %q", args, errout)
		}
	}
	after := qbNamespaces()
	for ns := range after {
		if !before[ns] && strings.Contains(ns, name) || strings.Contains(ns, "emu-") && !before[ns] {
			t.Errorf("bad input created namespace %s", ns)
		}
	}
}

func TestEmulateRunsCommandBehindLink(t *testing.T) {
	requireRootCLI(t)
	name := uniqueName("emu")
	code, out, errout := tbCLI(context.Background(), "emulate", "--name", name, "--link", "delay 2ms", "--server", "sleep 60", "--",
		"sh", "-c", `echo "$QUICBENCH_SERVER_ADDR $QUICBENCH_TESTBED"; grep -c qbtun0 /proc/net/dev; exit 7`)
	if code != 7 {
		t.Fatalf("emulate exit %d, want the command's 7; stderr %q", code, errout)
	}
	fields := strings.Fields(out)
	if len(fields) != 3 || !strings.HasPrefix(fields[0], "10.") || fields[1] != name || fields[2] != "1" {
		t.Fatalf("command output %q: want server address, testbed name and one qbtun0", out)
	}
	if !strings.Contains(errout, "server address "+fields[0]) {
		t.Fatalf("stderr does not print the server address %s: %q", fields[0], errout)
	}
	requireTestbedGone(t, name, "emulate")
}

func TestCleanupCommand(t *testing.T) {
	requireRootCLI(t)
	code, out, errout := tbCLI(context.Background(), "cleanup", "--json")
	var removed []string
	if code != 0 || json.Unmarshal([]byte(out), &removed) != nil {
		t.Fatalf("cleanup --json: %d %q %q", code, out, errout)
	}
	code, out, _ = tbCLI(context.Background(), "cleanup")
	if code != 0 || !strings.Contains(out, "nothing to clean up") && !strings.Contains(out, "removed") {
		t.Fatalf("cleanup: %d %q", code, out)
	}
}

func TestDoctorCommand(t *testing.T) {
	requireRootCLI(t)
	code, out, errout := tbCLI(context.Background(), "doctor", "--json")
	var r doctorReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("doctor --json: %d %q %q", code, out, errout)
	}
	if r.Mode != "root" || !r.Root {
		t.Fatalf("doctor as root: mode %q (%s)", r.Mode, r.Why)
	}
	names := map[string]string{}
	for _, c := range r.Checks {
		names[c.Name] = c.Status
	}
	want := []string{"/dev/net/tun", "nsenter", "testbed", "rootless mode", "congestion control cubic"}
	// every stack of the registry but quicbench's own, each role
	for _, st := range peers.All() {
		if st.Server != nil && st.Name != peers.Own {
			want = append(want, st.Name+" server")
		}
		if st.Client != nil && st.Name != peers.Own {
			want = append(want, st.ClientName()+" client")
		}
	}
	for _, w := range want {
		if names[w] == "" {
			t.Errorf("doctor has no %q check: %v", w, names)
		}
	}
	if names["testbed"] != checkOK {
		t.Errorf("testbed check %q", names["testbed"])
	}
	code, out, _ = tbCLI(context.Background(), "doctor")
	if code != 0 || !strings.Contains(out, "mode: root") {
		t.Fatalf("doctor text: %d %q", code, out)
	}
}

// testbed up --competing runs the flows while the testbed is up and says
// what each moved when it is removed: through a 10 Mbit/s link, a 4 Mbit/s
// UDP flow and a TCP flow together never exceed the link.
func TestTestbedUpCompeting(t *testing.T) {
	requireRootCLI(t)
	name := uniqueName("cmp")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code        int
		out, errout string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := tbCLI(ctx, "testbed", "up", "--name", name, "--link", "rate 10mbit delay 5ms", "--competing", "udp rate 4mbit; tcp cc cubic")
		done <- result{c, o, e}
	}()
	t.Cleanup(func() { netns.Down(context.Background(), name) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := netns.Lookup(name); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("testbed up exited %d: %s %s", r.code, r.out, r.errout)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("testbed up did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let the flows share the link
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("testbed up did not return")
	}
	if r.code != 0 {
		t.Fatalf("testbed up exited %d: %s", r.code, r.errout)
	}
	total := 0.0
	for _, kind := range []string{"udp", "tcp"} {
		re := regexp.MustCompile(`competing ` + kind + `[^:]*: (\d+) bytes, ([0-9.]+) Mbit/s\n`)
		m := re.FindStringSubmatch(r.errout)
		if m == nil {
			t.Fatalf("no %s flow line in %q", kind, r.errout)
		}
		mbps, _ := strconv.ParseFloat(m[2], 64)
		if mbps <= 0 {
			t.Errorf("%s flow moved nothing: %s", kind, m[0])
		}
		total += mbps
	}
	// 2% for the bins at the edges of the measured time.
	if total > 10*1.02 {
		t.Errorf("competing flows moved %.2f Mbit/s together through a 10 Mbit/s link:\n%s", total, r.errout)
	}
}

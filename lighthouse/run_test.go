package lighthouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// fakeDevTools serves /json/version on 127.0.0.1 like a browser's DevTools
// endpoint and returns its port.
func fakeDevTools(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/json/version" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"Browser": "HeadlessChrome/156.0.0.0", "webSocketDebuggerUrl": "ws://127.0.0.1/devtools/browser/x"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// freePort returns a loopback port nothing listens on (any more).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// fakeCLI returns an Install that runs a shell script instead of
// Lighthouse: node is /bin/sh, the CLI is the script, so that the script
// gets Lighthouse's arguments.
func fakeCLI(t *testing.T, body string) Install {
	t.Helper()
	sh, err := filepath.Abs("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "index.js")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return Install{Node: sh, CLI: script, Version: Version, NodeVersion: "v20.0.0"}
}

func absFixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunValidation(t *testing.T) {
	inst := fakeCLI(t, "exit 0\n")
	port := freePort(t) // validation fails before the port is probed
	ok := Options{URL: "https://127.0.0.1:4433/", Port: port}
	cases := []struct {
		name string
		inst Install
		edit func(o *Options)
		want string
	}{
		{"no install", Install{}, func(o *Options) {}, "Install has no node or no CLI"},
		{"empty URL", inst, func(o *Options) { o.URL = "" }, "option URL: empty"},
		{"relative URL", inst, func(o *Options) { o.URL = "/index.html" }, "not an absolute http:// or https:// URL"},
		{"ftp URL", inst, func(o *Options) { o.URL = "ftp://127.0.0.1/" }, "not an absolute http:// or https:// URL"},
		{"no host", inst, func(o *Options) { o.URL = "https:///x" }, "has no host"},
		{"bad URL", inst, func(o *Options) { o.URL = "https://[::1/" }, "option URL"},
		{"port 0", inst, func(o *Options) { o.Port = 0 }, "option Port: 0 is not in 1..65535"},
		{"port 65536", inst, func(o *Options) { o.Port = 65536 }, "option Port: 65536 is not in 1..65535"},
		{"negative wait", inst, func(o *Options) { o.MaxWaitForLoad = -time.Second }, "option MaxWaitForLoad: negative"},
		{"negative timeout", inst, func(o *Options) { o.Timeout = -time.Second }, "option Timeout: negative"},
		{"timeout too short", inst, func(o *Options) { o.MaxWaitForLoad = time.Minute; o.Timeout = 30 * time.Second }, "does not exceed MaxWaitForLoad"},
		{"default timeout too short", inst, func(o *Options) { o.MaxWaitForLoad = DefaultTimeout }, "does not exceed MaxWaitForLoad"},
		{"timeout within Lighthouse's default wait", inst, func(o *Options) { o.Timeout = 45 * time.Second }, "option Timeout 45s does not exceed Lighthouse's default MaxWaitForLoad 45s"},
	}
	for _, c := range cases {
		o := ok
		c.edit(&o)
		rep, err := Run(context.Background(), c.inst, o)
		if err == nil || !strings.Contains(err.Error(), c.want) || rep != nil {
			t.Errorf("%s: %v, %v; want error with %q", c.name, rep, err, c.want)
		}
	}
}

func TestRunNoBrowser(t *testing.T) {
	inst := fakeCLI(t, "echo started >&2\nexit 3\n")
	_, err := Run(context.Background(), inst, Options{URL: "http://127.0.0.1/", Port: freePort(t)})
	if err == nil || !strings.Contains(err.Error(), "no browser DevTools endpoint on 127.0.0.1:") {
		t.Errorf("nothing on the port: %v", err)
	}
	// Something that is not DevTools.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	_, err = Run(context.Background(), inst, Options{URL: "http://127.0.0.1/", Port: port})
	if err == nil || !strings.Contains(err.Error(), "not a browser DevTools endpoint") {
		t.Errorf("404 on the port: %v", err)
	}
}

// chromePathGuard returns the CHROME_PATH entry of env(): false(1), never
// the caller's.
func chromePathGuard(t *testing.T) string {
	t.Helper()
	for _, kv := range env() {
		if strings.HasPrefix(kv, "CHROME_PATH=") {
			if kv != "CHROME_PATH=/bin/false" && kv != "CHROME_PATH=/usr/bin/false" {
				t.Errorf("env sets %s", kv)
			}
			return kv
		}
	}
	t.Fatal("env sets no CHROME_PATH")
	return ""
}

// TestRunArgs checks node's command line and environment, and that a report
// on stdout with exit 0 is returned parsed.
func TestRunArgs(t *testing.T) {
	argsFile := filepath.Join(t.TempDir(), "args")
	inst := fakeCLI(t, fmt.Sprintf(`for a in "$0" "$@"; do echo "$a"; done > %s
echo "CHROME_PATH=$CHROME_PATH" >> %[1]s
echo "pgid=$(cut -d' ' -f5 /proc/$$/stat) pid=$$" >> %[1]s
cat %s
`, argsFile, absFixture(t, "b-h2.json")))
	t.Setenv("CHROME_PATH", "/usr/bin/chromium")
	port := fakeDevTools(t)
	var stderr bytes.Buffer
	rep, err := Run(context.Background(), inst, Options{URL: "https://10.1.2.2:4433/site/", Port: port, MaxWaitForLoad: 20 * time.Second, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FCP != 307.844 || len(rep.Requests) != 39 {
		t.Errorf("report FCP %v, %d requests", rep.FCP, len(rep.Requests))
	}
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		inst.CLI,
		"https://10.1.2.2:4433/site/",
		"--port=" + strconv.Itoa(port),
		"--only-categories=performance",
		"--output=json",
		"--output-path=stdout",
		"--throttling-method=provided",
		"--preset=desktop",
		"--quiet",
		"--disable-full-page-screenshot",
		"--chrome-ignore-default-flags",
		"--locale=en-US",
		"--no-enable-error-reporting",
		"--max-wait-for-load=20000",
		chromePathGuard(t),
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("script saw\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
	// node leads a process group of its own.
	var pgid, pid int
	if _, err := fmt.Sscanf(lines[len(want)], "pgid=%d pid=%d", &pgid, &pid); err != nil || pgid != pid {
		t.Errorf("process group: %q (%v)", lines[len(want)], err)
	}
	for _, a := range lines {
		if strings.HasPrefix(a, "--hostname") {
			t.Errorf("hostname set: %s", a)
		}
	}
}

func TestRunDefaultWait(t *testing.T) {
	argsFile := filepath.Join(t.TempDir(), "args")
	inst := fakeCLI(t, fmt.Sprintf("echo \"$@\" > %s\ncat %s\n", argsFile, absFixture(t, "b-h1.json")))
	if _, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(argsFile)
	if strings.Contains(string(b), "max-wait-for-load") {
		t.Errorf("MaxWaitForLoad 0 passed a flag: %s", b)
	}
}

// Lighthouse prints the report of a failed run, then exits 1.
func TestRunRuntimeError(t *testing.T) {
	inst := fakeCLI(t, fmt.Sprintf("cat %s\necho 'Runtime error encountered: The page did not paint any content.' >&2\nexit 1\n", absFixture(t, "f-nofcp.json")))
	var stderr bytes.Buffer
	rep, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t), Stderr: &stderr})
	var re *RuntimeError
	if !errors.As(err, &re) || re.Code != "NO_FCP" {
		t.Fatalf("Run = %v, want *RuntimeError NO_FCP", err)
	}
	if rep == nil || rep.RuntimeError != re {
		t.Errorf("report %v with the runtime error", rep)
	}
	if !strings.Contains(stderr.String(), "Runtime error encountered") {
		t.Errorf("Stderr got %q", stderr.String())
	}
}

func TestRunExitWithoutReport(t *testing.T) {
	inst := fakeCLI(t, "echo 'Unable to connect to Chrome' >&2\nexit 1\n")
	rep, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 1 || rep != nil {
		t.Fatalf("Run = %v, %v; want *ExitError 1", rep, err)
	}
	for _, s := range []string{"exit status 1", "Unable to connect to Chrome", "unexpected end of JSON input"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}

	// Exit 0 but something else than a report.
	inst = fakeCLI(t, "echo 'not a report'\n")
	_, err = Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)})
	if !errors.As(err, &ee) || ee.ExitCode != 0 || !strings.Contains(err.Error(), "exit status 0 but no report on stdout") {
		t.Errorf("exit 0 without report: %v", err)
	}

	// A report without runtime error but a failed exit: both come back.
	inst = fakeCLI(t, fmt.Sprintf("cat %s\nexit 2\n", absFixture(t, "b-h3.json")))
	rep, err = Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)})
	if !errors.As(err, &ee) || ee.ExitCode != 2 || rep == nil || rep.FCP != 288.462 {
		t.Errorf("report and exit 2: %v, %v", rep, err)
	}

	// Killed by a signal.
	inst = fakeCLI(t, "kill -TERM $$\n")
	_, err = Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)})
	if !errors.As(err, &ee) || ee.ExitCode != -1 || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("killed by SIGTERM: %v", err)
	}
}

func TestRunStderrTail(t *testing.T) {
	inst := fakeCLI(t, "i=0; while [ $i -lt 500 ]; do echo \"line $i of noise noise noise noise noise\" >&2; i=$((i+1)); done\necho 'the last words' >&2\nexit 1\n")
	var all bytes.Buffer
	_, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t), Stderr: &all})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v", err)
	}
	if len(ee.Stderr) > stderrTail || !strings.HasSuffix(ee.Stderr, "the last words\n") || strings.Contains(ee.Stderr, "line 0 ") {
		t.Errorf("tail of %d bytes: ...%q", len(ee.Stderr), ee.Stderr[max(0, len(ee.Stderr)-80):])
	}
	if !strings.Contains(all.String(), "line 0 of") || !strings.HasSuffix(all.String(), "the last words\n") {
		t.Errorf("Stderr writer got %d bytes", all.Len())
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken") }

func TestRunFailingStderrWriter(t *testing.T) {
	inst := fakeCLI(t, fmt.Sprintf("echo noise >&2\ncat %s\n", absFixture(t, "b-h2.json")))
	if _, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t), Stderr: failingWriter{}}); err != nil {
		t.Errorf("a failing Stderr broke the run: %v", err)
	}
}

// gone reports whether pid has exited (or is a zombie waiting for a reaper).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// startHanging returns a fake CLI that starts a child (whose pid it writes
// to the returned file once running) and waits forever.
func startHanging(t *testing.T) (Install, string) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	inst := fakeCLI(t, fmt.Sprintf("echo 'waiting for the page' >&2\nsleep 300 &\necho $! > %s.tmp\nmv %[1]s.tmp %[1]s\nwait\n", pidFile))
	return inst, pidFile
}

func waitChildGone(t *testing.T, pidFile string) {
	t.Helper()
	pid := testsupport.ReadPID(t, pidFile, "the child never started")
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d of node survived", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits up to 10 s for name to exist. It does not use t: it runs
// in a goroutine of its own.
func waitFile(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(name); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never appeared", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunTimeout(t *testing.T) {
	inst, pidFile := startHanging(t)
	start := time.Now()
	rep, err := Run(context.Background(), inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t), MaxWaitForLoad: time.Second, Timeout: 1500 * time.Millisecond})
	elapsed := time.Since(start)
	var te *TimeoutError
	if !errors.As(err, &te) || rep != nil {
		t.Fatalf("Run = %v, %v; want *TimeoutError", rep, err)
	}
	if te.After != 1500*time.Millisecond || te.URL != "https://127.0.0.1/" || !strings.Contains(te.Stderr, "waiting for the page") {
		t.Errorf("%+v", te)
	}
	if !regexp.MustCompile(`^lighthouse: run on https://127.0.0.1/ timed out after 1.5s, node killed; stderr: waiting for the page$`).MatchString(err.Error()) {
		t.Errorf("message %q", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Run took %v after a 1.5 s timeout", elapsed)
	}
	waitChildGone(t, pidFile)
}

func TestRunContextCancel(t *testing.T) {
	inst, pidFile := startHanging(t)
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		// Cancels also when the child never started, so that Run returns.
		waited <- waitFile(pidFile)
		cancel()
	}()
	rep, err := Run(ctx, inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)})
	if werr := <-waited; werr != nil {
		t.Fatal(werr)
	}
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("Run = %v, %v; want context.Canceled", rep, err)
	}
	waitChildGone(t, pidFile)

	// A context that already ended stops Run before node starts.
	if _, err := Run(ctx, inst, Options{URL: "https://127.0.0.1/", Port: fakeDevTools(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}

// TestFlagsExist checks every flag Run passes against the cli-flags.js of
// the installed Lighthouse.
func TestFlagsExist(t *testing.T) {
	inst, err := Find()
	if err != nil {
		testsupport.Unavailable(t, "Lighthouse not installed: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(filepath.Dir(inst.CLI), "cli-flags.js"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{URL: "https://127.0.0.1/", Port: 9222, MaxWaitForLoad: time.Second}
	for _, a := range o.args(inst)[2:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		name = strings.TrimPrefix(name, "no-") // yargs negation of a boolean
		if !bytes.Contains(src, []byte("'"+name+"': {")) {
			t.Errorf("%s: no option %q in %s", a, name, filepath.Join(filepath.Dir(inst.CLI), "cli-flags.js"))
		}
	}
}

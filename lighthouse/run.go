package lighthouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout bounds a whole Run when Options.Timeout is zero. A run
// takes about 15-25 s on a fast link: Lighthouse waits for the load, then
// for 5.25 s of network and CPU quiet, then gathers and audits.
const DefaultTimeout = 2 * time.Minute

// defaultMaxWaitForLoad is Lighthouse's own --max-wait-for-load, which
// applies when Options.MaxWaitForLoad is 0 (maxWaitForLoad in
// core/config/constants.js).
const defaultMaxWaitForLoad = 45 * time.Second

// stderrTail is how many bytes of node's stderr Run keeps for its errors.
const stderrTail = 4 << 10

// maxReport bounds the report read from node's stdout.
const maxReport = 64 << 20

// probeTimeout bounds the check that a browser answers on the DevTools port.
const probeTimeout = 5 * time.Second

// waitDelay bounds the wait for node's output pipes after it exits or is
// killed (a grandchild could hold them).
const waitDelay = 5 * time.Second

// Options configure Run.
type Options struct {
	// URL is the page to audit, an absolute http:// or https:// URL.
	URL string
	// Port is the DevTools port of a running Chromium on 127.0.0.1 (in the
	// caller's network namespace), 1..65535.
	Port int
	// MaxWaitForLoad is Lighthouse's --max-wait-for-load: how long it waits
	// for the page to load before it takes what it has (with a run warning
	// that Report.Check reports). 0 means Lighthouse's default, 45 s.
	MaxWaitForLoad time.Duration
	// Timeout bounds the whole run; 0 means DefaultTimeout. When it
	// expires, node's process group is killed and Run returns a
	// *TimeoutError. It must exceed MaxWaitForLoad (Lighthouse's default,
	// 45 s, when MaxWaitForLoad is 0).
	Timeout time.Duration
	// Stderr receives node's stderr (nil discards it). Run keeps the last
	// few KB for its error messages anyway.
	Stderr io.Writer
}

// TimeoutError is returned by Run when Options.Timeout expired; node was
// killed.
type TimeoutError struct {
	URL    string
	After  time.Duration
	Stderr string // the end of node's stderr
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("lighthouse: run on %s timed out after %v, node killed%s", e.URL, e.After, stderrSuffix(e.Stderr))
}

// ExitError is returned by Run when node exited unsuccessfully (or was
// killed by a signal) without printing a report that names a runtime
// error.
type ExitError struct {
	ExitCode int    // -1 when killed by a signal
	Err      error  // the *exec.ExitError, or why the output is not a report
	Stderr   string // the end of node's stderr
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("lighthouse: node exited with %v%s", e.Err, stderrSuffix(e.Stderr))
}

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

func stderrSuffix(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// validate checks the options and fills in the defaults.
func (o Options) validate(inst Install) (Options, error) {
	if inst.Node == "" || inst.CLI == "" {
		return o, errors.New("lighthouse: Install has no node or no CLI (use Find)")
	}
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return o, errors.New("lighthouse: option URL: empty")
	case err != nil:
		return o, fmt.Errorf("lighthouse: option URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return o, fmt.Errorf("lighthouse: option URL: %q is not an absolute http:// or https:// URL", o.URL)
	case u.Hostname() == "":
		return o, fmt.Errorf("lighthouse: option URL: %q has no host", o.URL)
	}
	if o.Port < 1 || o.Port > 65535 {
		return o, fmt.Errorf("lighthouse: option Port: %d is not in 1..65535", o.Port)
	}
	if o.MaxWaitForLoad < 0 {
		return o, fmt.Errorf("lighthouse: option MaxWaitForLoad: negative duration %v", o.MaxWaitForLoad)
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("lighthouse: option Timeout: negative duration %v", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxWaitForLoad == 0 && defaultMaxWaitForLoad >= o.Timeout {
		return o, fmt.Errorf("lighthouse: option Timeout %v does not exceed Lighthouse's default MaxWaitForLoad %v (MaxWaitForLoad is 0)", o.Timeout, defaultMaxWaitForLoad)
	}
	if o.MaxWaitForLoad >= o.Timeout {
		return o, fmt.Errorf("lighthouse: option Timeout %v does not exceed MaxWaitForLoad %v", o.Timeout, o.MaxWaitForLoad)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	return o, nil
}

// args returns node's command line after the node executable.
func (o Options) args(inst Install) []string {
	a := []string{
		inst.CLI,
		o.URL,
		"--port=" + strconv.Itoa(o.Port),
		"--only-categories=performance",
		"--output=json",
		"--output-path=stdout",
		// The emulated link is the throttle: no simulation, no
		// DevTools throttling of Lighthouse's own.
		"--throttling-method=provided",
		"--preset=desktop",
		"--quiet",
		"--disable-full-page-screenshot",
		// Never launch a browser with chrome-launcher's default flags
		// (it would only if nothing listened on the port; see Run).
		"--chrome-ignore-default-flags",
		// Run warnings, which Report.Check matches, in English.
		"--locale=en-US",
		// No prompt, no configstore, no Sentry.
		"--no-enable-error-reporting",
		// No --skip-audits: skipping the costly weight-0 audits of the
		// category (bf-cache, image re-encoding, JS and CSS coverage,
		// ...) leaves the score's computation alone but saved no
		// measurable time (20.5 s a run either way on a 39-request site).
	}
	if o.MaxWaitForLoad > 0 {
		ms := o.MaxWaitForLoad.Milliseconds()
		if ms == 0 {
			ms = 1
		}
		a = append(a, "--max-wait-for-load="+strconv.FormatInt(ms, 10))
	}
	return a
}

// env returns node's environment. CHROME_PATH points at false(1): the
// Lighthouse CLI hands --port to chrome-launcher, which attaches to the
// browser listening there but, when nothing does, starts a Chromium of its
// own (in a process group of its own, with none of the sample's flags).
// With CHROME_PATH naming a program that exits at once, that launch fails
// instead ("Unable to connect to Chrome").
func env() []string {
	e := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHROME_PATH=") && !strings.HasPrefix(kv, "LIGHTHOUSE_CHROMIUM_PATH=") {
			e = append(e, kv)
		}
	}
	for _, f := range []string{"/bin/false", "/usr/bin/false"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			e = append(e, "CHROME_PATH="+f)
			break
		}
	}
	return e
}

// Run runs Lighthouse on opts.URL through the browser listening on
// 127.0.0.1:opts.Port and returns its parsed report.
//
// Before it starts node, Run checks that a DevTools endpoint answers on the
// port. node runs in its own process group, receives SIGKILL if the
// calling thread dies, and is killed with its group when ctx ends (Run then
// returns ctx's error) or opts.Timeout expires (a *TimeoutError); it is
// always waited for. The report comes from node's stdout.
//
// A report with a runtimeError (Lighthouse then exits 1) is returned
// together with its *RuntimeError. A report without one is returned with a
// nil error even if it is incomplete: call Report.Check. Without a report,
// a failed run returns an *ExitError with the exit status and the end of
// node's stderr.
func Run(ctx context.Context, inst Install, opts Options) (*Report, error) {
	o, err := opts.validate(inst)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lighthouse: run on %s: %w", o.URL, err)
	}
	if err := probe(ctx, o.Port); err != nil {
		return nil, err
	}

	tail := &tailBuffer{max: stderrTail}
	stdout := &limitedBuffer{max: maxReport}
	cmd := exec.Command(inst.Node, o.args(inst)...)
	cmd.Env = env()
	cmd.Stdin = nil
	cmd.Stdout = stdout
	cmd.Stderr = io.MultiWriter(tail, &ignoreErrors{w: o.Stderr})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lighthouse: starting %s: %w", inst.Node, err)
	}
	pgid := cmd.Process.Pid

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	var waitErr, stopErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		stopErr = fmt.Errorf("lighthouse: run on %s: %w", o.URL, ctx.Err())
	case <-timer.C:
		stopErr = &TimeoutError{URL: o.URL, After: o.Timeout}
	}
	if stopErr != nil {
		// Lighthouse starts no process of its own when it attaches to a
		// browser, but the whole group goes, whatever node started.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		if te, ok := stopErr.(*TimeoutError); ok {
			te.Stderr = tail.String()
		}
		return nil, stopErr
	}

	if stdout.overflow {
		return nil, &ExitError{ExitCode: exitCode(waitErr), Err: fmt.Errorf("report larger than %d bytes (exit: %v)", maxReport, waitErr), Stderr: tail.String()}
	}
	rep, perr := Parse(stdout.Bytes())
	if perr != nil {
		if waitErr == nil {
			waitErr = errors.New("exit status 0 but no report on stdout")
		}
		return nil, &ExitError{ExitCode: exitCode(waitErr), Err: fmt.Errorf("%w (stdout: %v)", waitErr, perr), Stderr: tail.String()}
	}
	if rep.RuntimeError != nil {
		return rep, rep.RuntimeError
	}
	if waitErr != nil {
		return rep, &ExitError{ExitCode: exitCode(waitErr), Err: waitErr, Stderr: tail.String()}
	}
	return rep, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// probe checks that a DevTools endpoint answers on 127.0.0.1:port.
func probe(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/json/version", nil)
	if err != nil {
		return fmt.Errorf("lighthouse: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("lighthouse: no browser DevTools endpoint on %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("webSocketDebuggerUrl")) {
		return fmt.Errorf("lighthouse: %s/json/version answered %s without webSocketDebuggerUrl: not a browser DevTools endpoint", addr, resp.Status)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(b)
}

// limitedBuffer keeps at most max bytes and notes an overflow.
type limitedBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.Len()+len(p) > l.max {
		l.overflow = true
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

// ignoreErrors passes writes on and drops the writer once it fails, so that
// a failing Options.Stderr cannot stop node's output (io.MultiWriter stops
// at the first error).
type ignoreErrors struct {
	w   io.Writer
	bad bool
}

func (i *ignoreErrors) Write(p []byte) (int, error) {
	if !i.bad {
		if _, err := i.w.Write(p); err != nil {
			i.bad = true
		}
	}
	return len(p), nil
}

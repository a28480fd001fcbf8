package browser

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/quicbench/quicbench/model"
)

// fakeExe is an executable file that findExe accepts, so option tests do
// not need Chromium.
func fakeExe(t *testing.T) string {
	t.Helper()
	p := t.TempDir() + "/chromium"
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOptionsValidate(t *testing.T) {
	exe := fakeExe(t)
	dir := t.TempDir()
	ok := Options{URL: "https://10.0.0.2:4433/", Protocol: model.ProtoH3, Exe: exe, ProfileDir: dir}
	spki := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	cases := []struct {
		name  string
		edit  func(*Options)
		field string // "" means valid
	}{
		{"valid h3", func(o *Options) {}, ""},
		{"valid h1c", func(o *Options) { o.Protocol = model.ProtoH1C; o.URL = "http://10.0.0.2/" }, ""},
		{"valid spki list", func(o *Options) { o.SPKIHash = spki + "," + spki }, ""},
		{"unknown protocol", func(o *Options) { o.Protocol = "quic" }, "Protocol"},
		{"missing URL", func(o *Options) { o.URL = "" }, "URL"},
		{"http for h2", func(o *Options) { o.Protocol = model.ProtoH2; o.URL = "http://10.0.0.2/" }, "URL"},
		{"https for h1c", func(o *Options) { o.Protocol = model.ProtoH1C }, "URL"},
		{"no host", func(o *Options) { o.URL = "https:///x" }, "URL"},
		{"alt-svc for h2", func(o *Options) { o.Protocol = model.ProtoH2; o.AltSvcDiscovery = true }, "AltSvcDiscovery"},
		{"alt-svc and forced", func(o *Options) { o.AltSvcDiscovery = true; o.ForceQUICOrigin = "10.0.0.2:4433" }, "AltSvcDiscovery"},
		{"forced for h2", func(o *Options) { o.Protocol = model.ProtoH2; o.ForceQUICOrigin = "10.0.0.2:443" }, "ForceQUICOrigin"},
		{"forced without port", func(o *Options) { o.ForceQUICOrigin = "10.0.0.2" }, "ForceQUICOrigin"},
		{"forced bad port", func(o *Options) { o.ForceQUICOrigin = "10.0.0.2:70000" }, "ForceQUICOrigin"},
		{"spki not base64", func(o *Options) { o.SPKIHash = "not base64!" }, "SPKIHash"},
		{"spki short", func(o *Options) { o.SPKIHash = "AAAA" }, "SPKIHash"},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }, "Timeout"},
		{"negative start timeout", func(o *Options) { o.StartTimeout = -time.Second }, "StartTimeout"},
		{"missing profile dir", func(o *Options) { o.ProfileDir = dir + "/nope" }, "ProfileDir"},
		{"missing netns", func(o *Options) { o.NetNS = "/run/netns/qb-does-not-exist" }, "NetNS"},
		{"bad extra arg", func(o *Options) { o.ExtraArgs = []string{"enable-foo"} }, "ExtraArgs"},
		{"missing exe", func(o *Options) { o.Exe = dir + "/no-chromium" }, "Exe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.edit(&o)
			got, err := o.validate(true)
			if c.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got.Timeout != DefaultTimeout || got.StartTimeout != DefaultStartTimeout {
					t.Errorf("defaults not applied: %+v", got)
				}
				return
			}
			var oe *OptionError
			if err == nil || !strings.Contains(err.Error(), "option "+c.field+":") || !errors.As(err, &oe) || oe.Field != c.field {
				t.Fatalf("err %v, want an *OptionError naming option %s", err, c.field)
			}
		})
	}
	o := ok
	o.Exe = dir + "/no-chromium"
	if _, err := o.validate(true); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("missing exe: %v does not wrap ErrNoBrowser", err)
	}
	// NewSession needs no URL, except to derive the QUIC origin.
	o = ok
	o.URL = ""
	if _, err := o.validate(false); err == nil || !strings.Contains(err.Error(), "ForceQUICOrigin") {
		t.Errorf("h3 without URL or origin: %v", err)
	}
	o.ForceQUICOrigin = "10.0.0.2:4433"
	if _, err := o.validate(false); err != nil {
		t.Errorf("h3 with origin, without URL: %v", err)
	}
}

// argMap turns Options.args into name -> value.
func argMap(o Options) map[string]any {
	m := map[string]any{}
	for _, a := range o.args() {
		m[a[0].(string)] = a[1]
	}
	return m
}

func TestArgsPerProtocol(t *testing.T) {
	base := Options{URL: "https://10.0.0.2:4433/", SPKIHash: "x"}
	cases := []struct {
		proto, force string
		discovery    bool
		want         map[string]any
		absent       []string
	}{
		{proto: model.ProtoH1, want: map[string]any{"disable-http2": true, "disable-quic": true}, absent: []string{"origin-to-force-quic-on"}},
		{proto: model.ProtoH2, want: map[string]any{"disable-quic": true}, absent: []string{"disable-http2", "origin-to-force-quic-on"}},
		{proto: model.ProtoH3, want: map[string]any{"origin-to-force-quic-on": "10.0.0.2:4433"}, absent: []string{"disable-quic", "disable-http2"}},
		{proto: model.ProtoH3, force: "10.0.0.3:443", want: map[string]any{"origin-to-force-quic-on": "10.0.0.3:443"}},
		{proto: model.ProtoH3, discovery: true, want: map[string]any{"origin-to-force-quic-on": "10.0.0.2:9"}},
	}
	for _, c := range cases {
		o := base
		o.Protocol, o.ForceQUICOrigin, o.AltSvcDiscovery = c.proto, c.force, c.discovery
		m := argMap(o)
		for k, v := range c.want {
			if m[k] != v {
				t.Errorf("%s force=%q discovery=%v: --%s = %v, want %v", c.proto, c.force, c.discovery, k, m[k], v)
			}
		}
		for _, k := range c.absent {
			if _, ok := m[k]; ok {
				t.Errorf("%s: --%s must not be set", c.proto, k)
			}
		}
		if m["ignore-certificate-errors-spki-list"] != "x" || m["headless"] != "new" || m["disable-background-networking"] != true {
			t.Errorf("%s: common flags missing: %v", c.proto, m)
		}
	}
	// The dummy port never equals the real one.
	o := Options{URL: "https://10.0.0.2:9/", Protocol: model.ProtoH3, AltSvcDiscovery: true}
	if got := o.quicOrigin(); got != "10.0.0.2:10" {
		t.Errorf("dummy origin for port 9: %s", got)
	}
	// IPv6 hosts keep their brackets; the default port is 443.
	o = Options{URL: "https://[fd00::2]/", Protocol: model.ProtoH3}
	if got := o.quicOrigin(); got != "[fd00::2]:443" {
		t.Errorf("IPv6 origin: %s", got)
	}
	o = Options{Protocol: model.ProtoH2, ExtraArgs: []string{"--host-resolver-rules=MAP * 10.0.0.2", "--enable-logging"}}
	m := argMap(o)
	if m["host-resolver-rules"] != "MAP * 10.0.0.2" || m["enable-logging"] != true {
		t.Errorf("extra args: %v", m)
	}
}

func TestResultConversion(t *testing.T) {
	raw := &rawResult{
		TimeOrigin: 1700000000123.5,
		URL:        "https://10.0.0.2:4433/index.html",
		Nav: &rawEntry{Name: "https://10.0.0.2:4433/index.html", Protocol: "h3", StartTime: 0,
			ResponseStart: 12.3456, ResponseEnd: 13, TransferSize: 1300, EncodedBodySize: 1000,
			DCL: 20.5, Load: 40.25},
		Resources: []rawEntry{
			{Name: "https://10.0.0.2:4433/b.png?v=1", Protocol: "h3", StartTime: 15, ResponseStart: 18, ResponseEnd: 19, TransferSize: 600, EncodedBodySize: 300},
			{Name: "https://10.0.0.2:4433/a.css", Protocol: "h2", StartTime: 14, ResponseStart: 16, ResponseEnd: 17, TransferSize: 500, EncodedBodySize: 200},
			{Name: "https://cdn.example/x.js", Protocol: "", StartTime: 16, ResponseStart: 0, ResponseEnd: 30, TransferSize: 0, EncodedBodySize: 0},
		},
		FCP: 24,
		LCP: 32,
	}
	resp := &network.Response{Protocol: "h3", ConnectionReused: true, Status: 200,
		SecurityDetails: &network.SecurityDetails{Protocol: "QUIC", Cipher: "AES_128_GCM"}}
	r := raw.result("h3", resp)

	if r.TTFB != 12345600 || r.DOMContentLoaded != 20500000 || r.Load != 40250000 || r.FCP != 24*time.Millisecond || r.LCP != 32*time.Millisecond {
		t.Errorf("timing: %+v", r)
	}
	if want := time.UnixMicro(1700000000123500); !r.Start.Equal(want) {
		t.Errorf("start %v, want %v", r.Start, want)
	}
	names := []string{}
	for _, res := range r.Resources {
		names = append(names, res.Name)
	}
	if !slices.Equal(names, []string{"/index.html", "/a.css", "/b.png?v=1", "https://cdn.example/x.js"}) {
		t.Errorf("names in order: %v", names)
	}
	if got := r.Resources[2]; got != (model.Resource{Name: "/b.png?v=1", Protocol: "h3", Start: 15e6, TTFB: 18e6, End: 19e6, Bytes: 300}) {
		t.Errorf("resource: %+v", got)
	}
	if r.TransferBytes != 2400 || r.BodyBytes != 1500 || r.CachedResources != 0 {
		t.Errorf("bytes: transfer %d, body %d", r.TransferBytes, r.BodyBytes)
	}
	if r.Negotiated != (model.Negotiated{ALPN: "h3", HTTPVersion: "HTTP/3.0", TLSVersion: "QUIC", Cipher: "AES_128_GCM"}) || !r.ConnectionReused || r.Status != 200 {
		t.Errorf("negotiated %+v reused %v status %d", r.Negotiated, r.ConnectionReused, r.Status)
	}

	err := r.check()
	var mm *ProtocolMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("check: %v, want *ProtocolMismatchError", err)
	}
	want := []Mismatch{{Name: "/a.css", Got: "h2"}, {Name: "https://cdn.example/x.js", Got: ""}}
	if !slices.Equal(mm.Mismatches, want) || mm.Total != 4 || mm.Want != "h3" {
		t.Errorf("mismatches %+v", mm)
	}
	if msg := err.Error(); msg != "browser: 2 of 4 resources did not use h3: /a.css used h2, https://cdn.example/x.js used no protocol" {
		t.Errorf("message %q", msg)
	}

	m := r.Metrics()
	if m["ttfb_ms"] != 12.3456 || m["load_ms"] != 40.25 || m["fcp_ms"] != 24 || m["resources"] != 4 || m["body_bytes"] != 1500 {
		t.Errorf("metrics %v", m)
	}
	// Without paint entries the paint metrics are absent, not zero.
	raw.FCP, raw.LCP = -1, -1
	r = raw.result("h3", nil)
	if m := r.Metrics(); m["fcp_ms"] != 0 || m["lcp_ms"] != 0 || len(m) != 7 {
		t.Errorf("metrics without paint: %v", m)
	}
	if r.Negotiated != (model.Negotiated{}) {
		t.Errorf("no response, but negotiated %+v", r.Negotiated)
	}
	r.Resources = r.Resources[:1]
	if err := r.check(); err != nil {
		t.Errorf("all h3, but %v", err)
	}

	// A load event that never ended: no page load time, an invalid load.
	raw.Nav.Load = 0
	r = raw.result("h3", nil)
	r.Resources = r.Resources[:1]
	var il *IncompleteLoadError
	if err := r.check(); !errors.As(err, &il) || il.Waited != LoadEventWait {
		t.Fatalf("check of a load without loadEventEnd: %v, want *IncompleteLoadError", err)
	}
	if bad := InvalidLoad(fmt.Errorf("connection warm: %w", r.check())); bad != il && bad.Error() != il.Error() {
		t.Errorf("InvalidLoad through a wrapper = %v", bad)
	}
	if _, ok := r.Metrics()["load_ms"]; ok {
		t.Errorf("load_ms present without a load event: %v", r.Metrics())
	}
	if InvalidLoad(errors.New("net::ERR_CONNECTION_REFUSED")) != nil {
		t.Error("InvalidLoad of an ordinary failure is not nil")
	}
}

func TestMismatchMessageIsBounded(t *testing.T) {
	e := &ProtocolMismatchError{Want: "h3", Total: 50}
	for range 40 {
		e.Mismatches = append(e.Mismatches, Mismatch{Name: "/x", Got: "h2"})
	}
	msg := e.Error()
	if !strings.HasSuffix(msg, "and 35 more") || strings.Count(msg, "/x used h2") != 5 {
		t.Errorf("message %q", msg)
	}
}

func TestResourceName(t *testing.T) {
	base, _ := url.Parse("https://10.0.0.2:4433/dir/page.html")
	for in, want := range map[string]string{
		"https://10.0.0.2:4433/a/b.png":   "/a/b.png",
		"https://10.0.0.2:4433":           "/",
		"https://10.0.0.2:4433/s?q=1&r=2": "/s?q=1&r=2",
		"https://10.0.0.2:443/other-port": "https://10.0.0.2:443/other-port",
		"http://10.0.0.2:4433/scheme":     "http://10.0.0.2:4433/scheme",
	} {
		if got := resourceName(base, in); got != want {
			t.Errorf("resourceName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReapKillsGroupAndProfileProcesses(t *testing.T) {
	dir := t.TempDir() + "/profile"
	// A group leader with a child in its group, and an unrelated process
	// (own group) that names the profile on its command line.
	leader := exec.Command("sh", "-c", "sleep 60 & exec sleep 61")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// "read" is a shell builtin: the shell itself blocks on stdin, keeping
	// its command line, and has no child.
	other := exec.Command("sh", "-c", "read x", "sh", "--user-data-dir="+dir)
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	defer stdinR.Close()
	other.Stdin = stdinR
	for _, c := range []*exec.Cmd{leader, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go c.Wait() // reap, as chromedp does for the main process
	}
	pgid := leader.Process.Pid
	// Wait until the group has its child (sh forks before it execs).
	deadline := time.Now().Add(5 * time.Second)
	for len(browserProcesses(dir, pgid)) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(browserProcesses(dir, pgid)); n != 3 {
		t.Fatalf("found %d processes before reap, want 3", n)
	}
	if err := reap(dir, pgid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if left := browserProcesses(dir, pgid); len(left) != 0 {
		t.Errorf("processes %v survived reap", left)
	}
}

func TestDisabledFeaturesMerge(t *testing.T) {
	o := Options{Protocol: model.ProtoH2, DisableFeatures: []string{"RenderDocument", "Translate"},
		ExtraArgs: []string{"--disable-features=BackForwardCache,RenderDocument", "--enable-logging"}}
	m := argMap(o)
	want := strings.Join(append(slices.Clone(baseDisabledFeatures), "RenderDocument", "BackForwardCache"), ",")
	if m["disable-features"] != want {
		t.Errorf("--disable-features=%v\nwant %s", m["disable-features"], want)
	}
	if m["enable-logging"] != true {
		t.Errorf("other extra args dropped: %v", m)
	}
	if a := o.portArgs(); a != nil {
		t.Errorf("DevTools port switches %q without RemoteDebugging", a)
	}
	o.RemoteDebugging = true
	if a := o.portArgs(); !slices.Equal(a, []string{"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"}) {
		t.Errorf("RemoteDebugging switches %q", a)
	}
	if _, ok := argMap(o)["remote-debugging-port"]; ok {
		t.Error("the DevTools port is among chromedp's flags (it would switch chromedp from the pipe to a WebSocket)")
	}
	for _, bad := range []string{"", "A,B", "A=1", "A B"} {
		o := Options{Protocol: model.ProtoH2, DisableFeatures: []string{"Ok", bad}}
		var oe *OptionError
		if _, err := o.validate(false); !errors.As(err, &oe) || oe.Field != "DisableFeatures" || !strings.Contains(err.Error(), "entry 2") {
			t.Errorf("DisableFeatures %q: %v", bad, err)
		}
	}
}

func TestReadActivePort(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		content string
		port    int
	}{
		{"40123\n/devtools/browser/0f3c\n", 40123},
		{"9222", 9222},
		{"", 0},
		{"0\n/x\n", 0},
		{"70000\n", 0},
		{"abc\n", 0},
	}
	for i, c := range cases {
		name := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(name, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		port, err := readActivePort(name)
		if port != c.port || (c.port == 0) != (err != nil) {
			t.Errorf("%q: port %d, err %v; want %d", c.content, port, err, c.port)
		}
	}
	if _, err := readActivePort(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

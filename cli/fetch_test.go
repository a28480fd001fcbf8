package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
)

func runEndpointCLI(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: stdin, Stdout: &out, Stderr: &errb, Args: args, Getenv: func(string) string { return "" }}
	code = Run(context.Background(), env)
	return code, out.String(), errb.String()
}

// serveControlled runs `quicbench serve --control` in-process and returns
// its ready line's info and a client for its control channel.
func serveControlled(t *testing.T, extra ...string) (endpoint.ServerInfo, *endpoint.ControlClient) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		env := &Env{Stdin: inR, Stdout: outW, Stderr: &errb, Args: append([]string{"serve", "--control", "--host", "127.0.0.1", "--port", "0", "--plain-port", "0"}, extra...)}
		done <- Run(context.Background(), env)
		outW.Close()
	}()
	cc := endpoint.NewControlClient(outR, inW)
	info, err := cc.Ready()
	if err != nil {
		t.Fatalf("ready: %v (stderr %s)", err, errb.String())
	}
	t.Cleanup(func() {
		if err := cc.Quit(); err != nil {
			t.Errorf("quit: %v", err)
		}
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errb.String())
		}
	})
	return info, cc
}

func TestServeAndFetchCLI(t *testing.T) {
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte(`<img src="a.bin">`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "a.bin"), make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	info, cc := serveControlled(t, "--site", "demo="+site, "--cc", "cubic")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(info.CAPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)

	// SSLKEYLOGFILE is the default key log, as in curl and browsers.
	keys := filepath.Join(t.TempDir(), "keys.log")
	t.Setenv("SSLKEYLOGFILE", keys)
	code, out, errs := runEndpointCLI(t, nil, "fetch", "--proto", "h3", "--ca", caFile, "--verify", base+"/bytes/100KB", base+"/echo")
	if code != 0 || !strings.Contains(out, `ALPN "h3" HTTP/3.0`) || !strings.Contains(out, "/bytes/100KB") {
		t.Fatalf("fetch h3: %d\n%s\n%s", code, out, errs)
	}
	if b, err := os.ReadFile(keys); err != nil || !strings.Contains(string(b), "CLIENT_HANDSHAKE_TRAFFIC_SECRET ") {
		t.Fatalf("$SSLKEYLOGFILE %s: %v\n%s", keys, err, b)
	}
	os.Unsetenv("SSLKEYLOGFILE")

	code, out, errs = runEndpointCLI(t, nil, "fetch", "--proto", "h2", "--page", "--json", "--ca", caFile, base+"/site/demo/")
	if code != 0 {
		t.Fatalf("fetch --page: %d %s", code, errs)
	}
	var res struct {
		endpoint.FetchResult
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(res.Requests) != 2 || res.Requests[1].Bytes != 1234 || res.Negotiated.ALPN != "h2" || res.Error != "" {
		t.Fatalf("page result %+v", res)
	}
	// The server's --cc applies to its sockets.
	replies, err := cc.ConnStats(0, res.ConnRefs()...)
	if err != nil || replies[0].Stats == nil || replies[0].Stats.CongestionAlgo != "cubic" {
		t.Fatalf("server stats %+v, %v", replies, err)
	}

	code, out, _ = runEndpointCLI(t, nil, "fetch", "--proto", "quic", "--0rtt", "--upload", "64KB", "--addr", "127.0.0.1:"+strconv.Itoa(info.Port), "--ca", caFile, "/upload")
	if code != 0 || !strings.Contains(out, "resumed yes, 0-RTT yes") || !strings.Contains(out, "65536 sent") && !strings.Contains(out, "64000 sent") {
		t.Fatalf("fetch quic --0rtt --upload: %d\n%s", code, out)
	}

	// h1c goes to the cleartext port.
	code, out, _ = runEndpointCLI(t, nil, "fetch", "--proto", "h1c", "http://127.0.0.1:"+strconv.Itoa(info.PlainPort)+"/echo")
	if code != 0 || !strings.Contains(out, "h1c to") {
		t.Fatalf("fetch h1c: %d\n%s", code, out)
	}

	// A failing fetch exits 1 and says why; --json still prints the result.
	code, out, errs = runEndpointCLI(t, nil, "fetch", "--proto", "h2", "--json", "--ca", caFile, base+"/nosuch")
	if code != ExitFailure || !strings.Contains(errs, "unexpected status 404") || !strings.Contains(out, `"error": "h2 /nosuch`) {
		t.Fatalf("404: %d\n%s\n%s", code, out, errs)
	}
}

func TestFetchCLIUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"at least one URL":     {"fetch"},
		"unknown protocol":     {"fetch", "--proto", "spdy", "https://127.0.0.1:1/"},
		"needs --addr":         {"fetch", "/echo"},
		"one server":           {"fetch", "https://127.0.0.1:1/a", "https://127.0.0.1:2/b"},
		"neither a path":       {"fetch", "ftp://x/y"},
		"--upload":             {"fetch", "--upload", "lots", "https://127.0.0.1:1/upload"},
		"exclude each other":   {"fetch", "--ca", "x.pem", "--insecure", "https://127.0.0.1:1/"},
		"--ca":                 {"fetch", "--ca", "/nonexistent.pem", "https://127.0.0.1:1/"},
		"TLS 1.3 early data":   {"fetch", "--proto", "h2", "--0rtt", "--insecure", "https://127.0.0.1:1/"},
		"raw protocols":        {"fetch", "--proto", "tcp", "--insecure", "https://127.0.0.1:1/page/1/1KB"},
		"--parallel":           {"fetch", "--parallel", "x", "https://127.0.0.1:1/"},
		"exactly one path":     {"fetch", "--page", "--insecure", "https://127.0.0.1:1/a", "https://127.0.0.1:1/b"},
		"not an IP address":    {"serve", "--host", "example.org"},
		"want NAME=DIR":        {"serve", "--site", "demo"},
		"--cert and --key":     {"serve", "--cert", "c.pem"},
		"unknown protocol \"x": {"serve", "--protocols", "h2,x"},
		"0..65535":             {"serve", "--port", "70000"},
	}
	for want, args := range cases {
		code, _, errs := runEndpointCLI(t, strings.NewReader(""), args...)
		if code != ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stderr %q; want usage error containing %q", args, code, errs, want)
		}
	}
}

func TestFetchCLIMismatchFails(t *testing.T) {
	info, _ := serveControlled(t, "--protocols", "h1,h1c")
	code, _, errs := runEndpointCLI(t, nil, "fetch", "--proto", "h2", "--insecure", "https://127.0.0.1:"+strconv.Itoa(info.Port)+"/echo")
	if code != ExitFailure || !strings.Contains(errs, "protocol mismatch for h2: ALPN is \"http/1.1\"") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(strings.Join(info.Protocols, ","), model.ProtoH1C) || len(info.Protocols) != 2 {
		t.Fatalf("protocols %v", info.Protocols)
	}
}

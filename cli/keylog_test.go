package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
)

// TestServeHonoursSSLKEYLOGFILE: quicbench serve appends its TLS secrets
// to $SSLKEYLOGFILE, as curl and browsers do, and a --keylog wins over
// it; a server the runner drives (--control) ignores it.
func TestServeHonoursSSLKEYLOGFILE(t *testing.T) {
	dir := t.TempDir()
	envKeys, flagKeys := filepath.Join(dir, "env.keys"), filepath.Join(dir, "flag.keys")
	serve := func(extra ...string) (port int, stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		outR, outW := io.Pipe()
		done := make(chan int, 1)
		var errb bytes.Buffer
		go func() {
			env := &Env{Stdin: strings.NewReader(""), Stdout: outW, Stderr: &errb,
				Args:   append([]string{"serve", "--host", "127.0.0.1", "--port", "0", "--plain-port", "0"}, extra...),
				Getenv: func(k string) string { return map[string]string{"SSLKEYLOGFILE": envKeys}[k] }}
			done <- Run(ctx, env)
			outW.Close()
		}()
		sc := bufio.NewScanner(outR)
		re := regexp.MustCompile(`TLS/TCP\s+127\.0\.0\.1:(\d+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				port, _ = strconv.Atoi(m[1])
				break
			}
		}
		go io.Copy(io.Discard, outR)
		if port == 0 {
			cancel()
			t.Fatalf("serve printed no port: %s", errb.String())
		}
		return port, func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("serve did not stop")
			}
		}
	}
	fetch := func(port int) {
		_, err := endpoint.Fetch(context.Background(), endpoint.FetchSpec{Proto: "h2", Addr: "127.0.0.1:" + strconv.Itoa(port), Insecure: true, Paths: []string{"/bytes/100"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	port, stop := serve()
	fetch(port)
	stop()
	if b, _ := os.ReadFile(envKeys); !bytes.Contains(b, []byte("CLIENT_TRAFFIC_SECRET_0 ")) {
		t.Fatalf("$SSLKEYLOGFILE holds %q", b)
	}
	os.Remove(envKeys)
	port, stop = serve("--keylog", flagKeys)
	fetch(port)
	stop()
	if b, _ := os.ReadFile(flagKeys); !bytes.Contains(b, []byte("SERVER_HANDSHAKE_TRAFFIC_SECRET ")) {
		t.Fatalf("--keylog holds %q", b)
	}
	if _, err := os.Stat(envKeys); err == nil {
		t.Fatal("--keylog given, yet $SSLKEYLOGFILE written")
	}
}

// TestFetchFirefoxKeyLog: fetch --client firefox --keylog has Firefox
// write its TLS secrets there.
func TestFetchFirefoxKeyLog(t *testing.T) {
	requireFirefoxCLI(t)
	t.Setenv("TMPDIR", t.TempDir())
	info, _ := serveControlled(t)
	keys := filepath.Join(t.TempDir(), "ff.keys")
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	code, out, errs := runEndpointCLI(t, nil, "fetch", "--client", "firefox", "--proto", "h2", "--insecure", "--keylog", keys, base+"/page/1/1KB")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if b, _ := os.ReadFile(keys); !bytes.Contains(b, []byte("CLIENT_TRAFFIC_SECRET_0 ")) {
		t.Fatalf("Firefox's key log holds %q", b)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1 kB", 1_234_567: "1.23 MB", 5_000_000_000: "5 GB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

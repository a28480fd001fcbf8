package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

// tshark runs tshark with args and returns its output lines; the test is
// unavailable without tshark (bash scripts/setup.sh installs it).
func tshark(t *testing.T, args ...string) []string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		testsupport.Unavailable(t, "tshark is not installed (bash scripts/setup.sh installs it)")
	}
	cmd := exec.Command(bin, append([]string{"-n"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user preferences, no key log file
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("tshark %v: %v: %s", args, err, ee.Stderr)
		}
		t.Fatalf("tshark %v: %v", args, err)
	}
	var lines []string
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// runCapture runs plan text with the options' capture into a new
// database and returns its path and dataset.
func runCapture(t *testing.T, text string, capt plan.CaptureSpec) (string, *model.Dataset) {
	t.Helper()
	p, err := plan.Parse("capture.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "capture.db")
	exe, _ := os.Executable()
	var log strings.Builder
	if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, Capture: capt}); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	ds := load(t, db)
	checkComplete(t, ds)
	return db, ds
}

// evidenceCmd runs quicbench evidence with args and returns its standard
// output and exit code.
func evidenceCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Args: append([]string{"evidence"}, args...), Getenv: func(string) string { return "" }})
	return out.String(), errb.String(), code
}

// cellOf returns the cell of a sample.
func cellOf(ds *model.Dataset, s *model.Sample) *model.Cell {
	for i := range ds.Cells {
		if ds.Cells[i].ID == s.CellID {
			return &ds.Cells[i]
		}
	}
	return nil
}

// TestCaptureDecryptsWithEmbeddedSecrets: a run with capture: pcap keeps,
// with each sample, a pcapng that tshark opens and decrypts with the
// secrets it embeds and no other file: the HTTP/3 request's HEADERS frame
// of an h3 sample, the HTTP/2 HEADERS with the request's :path of an h2
// sample. Without the embedded secrets (editcap --discard-all-secrets)
// neither shows. quicbench evidence lists the samples and writes their
// files.
func TestCaptureDecryptsWithEmbeddedSecrets(t *testing.T) {
	needRoot(t)
	const text = `
name: capture
seed: 3
iterations: 1
warmup: false
protocols: [h2, h3]
timeout: 20s
capture: pcap
capture_snap: whole
scenarios:
  - name: delayed
    link: "delay 5ms"
tests:
  - test: download
    params: {size: 100KB}
`
	db, ds := runCapture(t, text, plan.CaptureSpec{})
	list, stderr, code := evidenceCmd(t, db)
	if code != 0 || strings.Count(list, "capture.pcapng") != 2 || strings.Count(list, "keys.log") != 2 {
		t.Fatalf("evidence list (exit %d):\n%s%s", code, list, stderr)
	}
	editcap, err := exec.LookPath("editcap")
	if err != nil {
		testsupport.Unavailable(t, "editcap (Wireshark's) is not installed")
	}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		c := cellOf(ds, s)
		if s.Status != model.StatusOK {
			t.Fatalf("%s: %s %s", c.Key, s.Status, s.Error)
		}
		dir := filepath.Join(t.TempDir(), "ev")
		out, stderr, code := evidenceCmd(t, db, "--sample", itoa(s.ID), "-o", dir)
		if code != 0 {
			t.Fatalf("evidence --sample %d: exit %d: %s", s.ID, code, stderr)
		}
		pcap := filepath.Join(dir, "capture.pcapng")
		if !strings.Contains(out, pcap) {
			t.Fatalf("evidence printed %q", out)
		}
		keys, _ := os.ReadFile(filepath.Join(dir, "keys.log"))
		if !bytes.Contains(keys, []byte("CLIENT_TRAFFIC_SECRET_0 ")) {
			t.Fatalf("%s: key log %q", c.Key, keys)
		}
		bare := filepath.Join(dir, "bare.pcapng")
		if out, err := exec.Command(editcap, "--discard-all-secrets", pcap, bare).CombinedOutput(); err != nil {
			t.Fatalf("editcap: %v: %s", err, out)
		}
		switch c.Protocol {
		case model.ProtoH3:
			// HTTP/3 HEADERS from the client: the request (Debian's tshark
			// decodes no QPACK field values, so the path is not shown).
			filter := "http3.frame_type == 1 && udp.dstport == 4433"
			if got := tshark(t, "-r", pcap, "-Y", filter, "-T", "fields", "-e", "frame.number"); len(got) == 0 {
				t.Errorf("%s: no HTTP/3 request HEADERS frame decrypted", c.Key)
			}
			if got := tshark(t, "-r", bare, "-Y", filter, "-T", "fields", "-e", "frame.number"); len(got) != 0 {
				t.Errorf("%s: HTTP/3 HEADERS decoded without the secrets", c.Key)
			}
		case model.ProtoH2:
			got := tshark(t, "-r", pcap, "-Y", "http2.type == 1", "-T", "fields", "-e", "http2.header.value")
			if !strings.Contains(strings.Join(got, "\n"), "/bytes/100000") {
				t.Errorf("%s: no HTTP/2 HEADERS with :path /bytes/100000 decrypted: %q", c.Key, got)
			}
			if got := tshark(t, "-r", bare, "-Y", "http2.type == 1", "-T", "fields", "-e", "frame.number"); len(got) != 0 {
				t.Errorf("%s: HTTP/2 HEADERS decoded without the secrets", c.Key)
			}
		}
		for _, m := range []string{"wire_ttfb_ms", "wire_goodput_mbps"} {
			// 5 ms each way: no response before two round trips.
			if v, ok := s.Metrics[m]; !ok || v <= 0 || m == "wire_ttfb_ms" && v < 20 {
				t.Errorf("%s: %s = %v (%v)", c.Key, m, v, ok)
			}
		}
	}
	// --all writes every sample's files.
	all := filepath.Join(t.TempDir(), "all")
	out, stderr, code := evidenceCmd(t, db, "--all", "-o", all)
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("evidence --all (exit %d): %s%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(all, "sample-"+itoa(ds.Samples[0].ID), "capture.pcapng")); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := evidenceCmd(t, db, "--sample", "9999"); code != cli.ExitUsage || !strings.Contains(stderr, "no sample 9999") {
		t.Fatalf("unknown sample: exit %d %s", code, stderr)
	}
}

// TestCaptureMarksEveryDrop: a lossy sample's capture marks exactly as
// many packets dropped by loss as the sample's DropLoss counters, per
// direction, and holds exactly the packets the link counters count.
func TestCaptureMarksEveryDrop(t *testing.T) {
	needRoot(t)
	const text = `
name: lossy
seed: 5
iterations: 2
warmup: false
protocols: [h2, h3]
timeout: 30s
scenarios:
  - name: lossy
    link: "delay 5ms loss 4%"
tests:
  - test: download
    params: {size: 300KB}
`
	db, ds := runCapture(t, text, plan.CaptureSpec{Kinds: []string{plan.CapturePcap}})
	s, err := store.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lost := uint64(0)
	for i := range ds.Samples {
		smp := &ds.Samples[i]
		c := cellOf(ds, smp)
		path := filepath.Join(t.TempDir(), "c.pcapng")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CopyEvidence(context.Background(), smp.ID, "capture.pcapng", f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for iface, k := range []struct {
			name string
			c    model.Sample
		}{{"up", *smp}, {"down", *smp}} {
			cnt := smp.LinkUp
			if iface == 1 {
				cnt = smp.LinkDown
			}
			sel := "frame.interface_id == " + itoa(int64(iface))
			drops := tshark(t, "-r", path, "-Y", sel+` && frame.comment contains "dropped by loss"`, "-T", "fields", "-e", "frame.number")
			if uint64(len(drops)) != cnt.DropLoss {
				t.Errorf("%s %s: %d packets marked dropped by loss, DropLoss %d", c.Key, k.name, len(drops), cnt.DropLoss)
			}
			all := tshark(t, "-r", path, "-Y", sel, "-T", "fields", "-e", "frame.number")
			if want := cnt.PacketsOut + cnt.DropLoss + cnt.DropQueue + cnt.DropMTU + cnt.DropOff; uint64(len(all)) != want {
				t.Errorf("%s %s: %d packets in the capture, the link counted %d", c.Key, k.name, len(all), want)
			}
			lost += cnt.DropLoss
		}
		if _, ok := smp.Metrics["wire_ttfb_ms"]; !ok {
			t.Errorf("%s: no wire_ttfb_ms", c.Key)
		}
	}
	if lost == 0 {
		t.Fatal("4% loss dropped no packet: the test checked nothing")
	}
	warns, err := s.RunWarnings(context.Background(), ds.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warns {
		if strings.Contains(w, "capture") {
			t.Errorf("run warning: %s", w)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCaptureClientSecrets: Caddy writes no key log, so the captures of
// samples it serves are decrypted with the clients' secrets only: the
// built-in client's (crypto/tls), Chromium's (--ssl-key-log-file) and
// Firefox's (SSLKEYLOGFILE), each with the HTTP/2 request's :path.
func TestCaptureClientSecrets(t *testing.T) {
	needRoot(t)
	needChromium(t)
	needFirefox(t)
	if st, _ := peers.ServerStack("caddy"); true {
		if _, _, err := peers.Check(context.Background(), st, peers.RoleServer); err != nil {
			testsupport.Unavailable(t, "caddy: %v", err)
		}
	}
	const text = `
name: clients
seed: 4
iterations: 1
warmup: false
protocols: [h2]
client: [builtin, chromium, firefox]
server: caddy
timeout: 60s
capture: pcap
capture_snap: whole
scenarios:
  - name: d2
    link: "delay 2ms"
tests:
  - test: page
    params: {objects: 2, size: 4KB}
`
	db, ds := runCapture(t, text, plan.CaptureSpec{})
	clients := map[string]bool{}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		c := cellOf(ds, s)
		if s.Status != model.StatusOK {
			t.Fatalf("%s: %s %s", c.Key, s.Status, s.Error)
		}
		dir := filepath.Join(t.TempDir(), "ev")
		if _, stderr, code := evidenceCmd(t, db, "--sample", itoa(s.ID), "-o", dir); code != 0 {
			t.Fatalf("%s: evidence: %s", c.Key, stderr)
		}
		got := tshark(t, "-r", filepath.Join(dir, "capture.pcapng"), "-Y", "http2.type == 1", "-T", "fields", "-e", "http2.header.value")
		if !strings.Contains(strings.Join(got, "\n"), "/page/2/4KB") {
			t.Errorf("%s: no HTTP/2 request for /page/2/4KB decrypted with the client's secrets: %q", c.Key, got)
		}
		clients[c.Client] = true
	}
	if len(clients) != 3 {
		t.Fatalf("clients %v", clients)
	}
}

// TestCaptureHAR: with capture: har, every browser page load keeps a HAR
// (evidence page.har) that lists the page and each of its objects with
// the protocol the sample's check read for it, for Chromium and Firefox,
// over h2 and h3; the built-in client's samples keep none.
func TestCaptureHAR(t *testing.T) {
	needRoot(t)
	needChromium(t)
	needFirefox(t)
	const text = `
name: har
seed: 5
iterations: 1
warmup: false
protocols: [h2, h3]
client: [builtin, chromium, firefox]
timeout: 60s
capture: har
scenarios:
  - name: d5
    link: "delay 5ms"
tests:
  - test: page
    params: {objects: 3, size: 4KB}
`
	db, ds := runCapture(t, text, plan.CaptureSpec{})
	clients := map[string]int{}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		c := cellOf(ds, s)
		if s.Status != model.StatusOK {
			t.Fatalf("%s: %s %s", c.Key, s.Status, s.Error)
		}
		dir := filepath.Join(t.TempDir(), "ev")
		_, stderr, code := evidenceCmd(t, db, "--sample", itoa(s.ID), "-o", dir)
		if c.Client == model.ClientBuiltin {
			if code == 0 {
				t.Errorf("%s: the built-in client's sample kept evidence", c.Key)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("%s: evidence: %s", c.Key, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "page.har"))
		if err != nil {
			t.Fatalf("%s: %v", c.Key, err)
		}
		var h har.HAR
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("%s: page.har: %v", c.Key, err)
		}
		want := map[string]bool{"/page/3/4KB": false}
		for k := 0; k < 3; k++ {
			want[fmt.Sprintf("/page/3/4KB/%d.png", k)] = false
		}
		for _, e := range h.Log.Entries {
			u, err := url.Parse(e.Request.URL)
			if err != nil {
				t.Fatalf("%s: entry URL %q: %v", c.Key, e.Request.URL, err)
			}
			if _, ok := want[u.Path]; !ok {
				continue
			}
			want[u.Path] = true
			if e.Response.HTTPVersion != c.Protocol {
				t.Errorf("%s: %s: httpVersion %q, want the checked %s", c.Key, u.Path, e.Response.HTTPVersion, c.Protocol)
			}
		}
		for p, seen := range want {
			if !seen {
				t.Errorf("%s: page.har lacks %s (%d entries)", c.Key, p, len(h.Log.Entries))
			}
		}
		clients[c.Client]++
	}
	if clients["chromium"] != 2 || clients["firefox"] != 2 {
		t.Fatalf("HARs per client %v, want 2 each", clients)
	}
}

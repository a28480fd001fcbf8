package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// tryFetch is fetch returning the failure (with the helper's output)
// instead of failing the test.
func (r *testbedRig) tryFetch(t *testing.T, s FetchSpec) (*FetchResult, error) {
	t.Helper()
	s.Addr = net.JoinHostPort(r.tb.Addr(netns.Server).String(), strconv.Itoa(r.info.Port))
	out := filepath.Join(t.TempDir(), "result.json")
	job, _ := json.Marshal(helperJob{Spec: s, CAPEM: r.info.CAPEM, Out: out})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := r.tb.Command(ctx, netns.Client, os.Args[0], "-test.run=^TestFetchHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(job))
	var combined bytes.Buffer
	cmd.Stdout, cmd.Stderr = &combined, &combined
	if err := cmd.Run(); err != nil {
		return nil, errors.New(combined.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	var res FetchResult
	return &res, json.Unmarshal(b, &res)
}

func (r *testbedRig) setLink(t *testing.T, s string) {
	t.Helper()
	l, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.tb.SetLink(l, l, 1); err != nil {
		t.Fatal(err)
	}
}

// TestPathMTU runs h2 and h3 downloads over a path with an MTU of 1280
// bytes (mtu 1280), first as an ICMP black hole, then with the router's
// ICMP fragmentation-needed messages, and checks what docs/link-spec.md
// says each stack does.
func TestPathMTU(t *testing.T) {
	r := newTestbedRig(t, "mtu 1280 blackhole")
	short := 2 * time.Second

	// Black hole: Linux TCP (tcp_mtu_probing 0, the default) keeps sending
	// full-sized segments, so the server's TLS flight never arrives.
	_, err := r.tryFetch(t, FetchSpec{Proto: model.ProtoH2, Paths: []string{"/bytes/1MiB"}, HandshakeTimeout: short})
	if err == nil || !strings.Contains(err.Error(), "handshake took longer") {
		t.Errorf("h2 over an MTU black hole: want a handshake timeout, got %v", err)
	}
	_, down := r.tb.Counters()
	_, fs := r.tb.ForwarderStats()
	if down.DropMTU == 0 || fs.FragNeeded != 0 {
		t.Errorf("black hole: %d packets dropped above the MTU (want some), %d ICMP messages (want none)", down.DropMTU, fs.FragNeeded)
	}

	// With ICMP: the server's kernel learns the path MTU and the download
	// completes.
	r.setLink(t, "mtu 1280")
	res, err := r.tryFetch(t, FetchSpec{Proto: model.ProtoH2, Paths: []string{"/bytes/1MiB"}, HandshakeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("h2 over a 1280-byte path with ICMP: %v", err)
	}
	if res.Bytes != 1<<20 {
		t.Errorf("h2: %d bytes, want 1 MiB", res.Bytes)
	}
	_, down = r.tb.Counters()
	_, fs = r.tb.ForwarderStats()
	if down.DropMTU == 0 || fs.FragNeeded != down.DropMTU {
		t.Errorf("icmp: %d packets dropped above the MTU, %d ICMP messages: want as many, more than 0", down.DropMTU, fs.FragNeeded)
	}
	var route bytes.Buffer
	cmd := r.tb.Command(context.Background(), netns.Server, "ip", "route", "get", r.tb.Addr(netns.Client).String())
	cmd.Stdout, cmd.Stderr = &route, &route
	if err := cmd.Run(); err != nil || !strings.Contains(route.String(), "mtu 1280") {
		t.Errorf("the server's route to the client caches no path MTU of 1280: %v\n%s", err, route.String())
	}

	// quic-go ignores ICMP (IP_PMTUDISC_PROBE) and starts with 1280-byte
	// UDP payloads, 1308-byte IPv4 packets: its handshake cannot cross a
	// 1280-byte IPv4 path. If this changes, so must docs/link-spec.md.
	_, err = r.tryFetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/1MiB"}, HandshakeTimeout: short})
	if err == nil || !strings.Contains(err.Error(), "handshake took longer") {
		t.Errorf("h3 over a 1280-byte IPv4 path: want a handshake timeout (quic-go's Initial is 1308 bytes), got %v", err)
	}
	// At 1308 bytes it fits, and the DPLPMTUD probes above are lost.
	r.setLink(t, "mtu 1308")
	if res, err = r.tryFetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/1MiB"}, HandshakeTimeout: 10 * time.Second}); err != nil {
		t.Fatalf("h3 over a 1308-byte path: %v", err)
	}
	if res.Bytes != 1<<20 {
		t.Errorf("h3: %d bytes, want 1 MiB", res.Bytes)
	}
}

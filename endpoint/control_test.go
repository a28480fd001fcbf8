package endpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

func TestControlProtocol(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServeControl(context.Background(), srv, inR, outW); outW.Close() }()

	cc := NewControlClient(outR, inW)
	info, err := cc.Ready()
	if err != nil {
		t.Fatal(err)
	}
	if info.Port != srv.Info().Port || info.SPKI != srv.Info().SPKI || info.CAPEM == "" {
		t.Fatalf("ready line %+v", info)
	}
	if err := cc.Ping(); err != nil {
		t.Fatal(err)
	}
	c0, err := cc.CPU()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Fetch(context.Background(), specFor(srv, pool, model.ProtoQUIC, "/bytes/1MB"))
	if err != nil {
		t.Fatal(err)
	}
	c1, err := cc.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if d := c1.Sub(c0); d.User+d.Sys <= 0 {
		t.Errorf("CPU did not advance over a 1 MB transfer: %+v -> %+v", c0, c1)
	}
	replies, err := cc.ConnStats(500*time.Millisecond, append(res.ConnRefs(), ConnRef{Kind: "tcp", Addr: "127.0.0.1:9"}, ConnRef{Kind: "sctp"})...)
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 3 || replies[0].Stats == nil || replies[0].Stats.Kind != "quic" || replies[0].Stats.PacketsSent == 0 {
		t.Fatalf("stats replies %+v", replies)
	}
	if replies[1].Stats != nil || !strings.Contains(replies[1].Error, "no statistics") {
		t.Errorf("unknown connection: %+v", replies[1])
	}
	if !strings.Contains(replies[2].Error, "want tcp or quic") {
		t.Errorf("bad kind: %+v", replies[2])
	}
	if _, err := cc.ConnStats(time.Second); err == nil || !strings.Contains(err.Error(), "conns") {
		t.Errorf("stats without conns: %v", err)
	}
	if err := cc.Quit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ServeControl: %v", err)
	}
	// An unknown op and a malformed line are answered and the session goes
	// on.
	var out strings.Builder
	in := `{"id":1,"op":"reboot"}` + "\n{not json\n" + `{"id":2,"op":"ping"}` + "\n"
	if err := ServeControl(context.Background(), srv, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "unknown op") || !strings.Contains(lines[2], "malformed") || !strings.Contains(lines[3], `"ok":true`) {
		t.Fatalf("unknown op and malformed line answered %q", lines)
	}
}

// The server serves exactly the server role's operations.
func TestControlServesItsTable(t *testing.T) {
	srv, _ := testServer(t, ServerConfig{Protocols: []string{model.ProtoH1C}})
	if err := controlServer(srv).Check(); err != nil {
		t.Error(err)
	}
}

func TestControlEndsWithInput(t *testing.T) {
	srv, _ := testServer(t, ServerConfig{Protocols: []string{model.ProtoH1C}})
	var out strings.Builder
	err := ServeControl(context.Background(), srv, strings.NewReader(`{"op":"ping"}`+"\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["event"] != "ready" || lines[1]["ok"] != true {
		t.Fatalf("output %q", out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	if err := ServeControl(ctx, srv, pr, io.Discard); err != context.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
}

package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func pipePair(t *testing.T, h Handler) (*Client, func()) {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), reqR, respW, h); respW.Close() }()
	c := NewClient(reqW, respR)
	return c, func() {
		reqW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

func TestCallRoundTrip(t *testing.T) {
	c, stop := pipePair(t, func(_ context.Context, op string, body json.RawMessage) (any, error) {
		switch op {
		case "add":
			var in [2]int
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, err
			}
			return in[0] + in[1], nil
		case "fail":
			return nil, errors.New("it failed")
		}
		return nil, errors.New("unknown op " + op)
	})
	defer stop()
	var sum int
	if err := c.Call(context.Background(), "add", [2]int{2, 3}, &sum); err != nil || sum != 5 {
		t.Fatalf("add: %v %d", err, sum)
	}
	err := c.Call(context.Background(), "fail", nil, nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Msg != "it failed" {
		t.Fatalf("fail: got %v", err)
	}
	big := strings.Repeat("x", 1<<20)
	var n int
	c2, stop2 := pipePair(t, func(_ context.Context, _ string, body json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, err
		}
		return len(s), nil
	})
	defer stop2()
	if err := c2.Call(context.Background(), "len", big, &n); err != nil || n != len(big) {
		t.Fatalf("1 MiB message: err %v, peer saw %d bytes, want %d", err, n, len(big))
	}
}

func TestCallHonoursContext(t *testing.T) {
	reqR, reqW := io.Pipe()
	go io.Copy(io.Discard, reqR)
	silent, _ := io.Pipe() // a peer that never answers
	c := NewClient(reqW, silent)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Call(ctx, "x", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestServeRejectsMalformed(t *testing.T) {
	var out strings.Builder
	err := Serve(context.Background(), strings.NewReader("not json\n"), &out, func(context.Context, string, json.RawMessage) (any, error) {
		t.Fatal("handler called for a malformed request")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "malformed request") {
		t.Fatalf("response %q does not name the problem", out.String())
	}
}

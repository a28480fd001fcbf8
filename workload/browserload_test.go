package workload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// keptFake is a browser without a process for KeptBrowsers: it counts
// what was asked of it, and its pages record where each load ran.
type keptFake struct {
	id       int
	loads    []string // "browser" or "context N", per load
	contexts int
	closed   int
}

func (f *keptFake) Alive() error               { return nil }
func (f *keptFake) Ping(context.Context) error { return nil }
func (f *keptFake) ProcessGroup() int          { return 1000 + f.id }
func (f *keptFake) Close() error               { f.closed++; return nil }
func (f *keptFake) Load(context.Context, string) (*browser.Result, error) {
	f.loads = append(f.loads, "browser")
	return fakeLoad(), nil
}
func (f *keptFake) Bench(context.Context, string, string) ([]byte, error) {
	f.loads = append(f.loads, "browser bench")
	return []byte("{}"), nil
}

// keptFakeContext is a context of a keptFake.
type keptFakeContext struct {
	b        *keptFake
	n        int
	closeErr error
	closed   bool
}

func (c *keptFakeContext) Load(context.Context, string) (*browser.Result, error) {
	c.b.loads = append(c.b.loads, "context")
	return fakeLoad(), nil
}
func (c *keptFakeContext) Bench(context.Context, string, string) ([]byte, error) {
	c.b.loads = append(c.b.loads, "context bench")
	return []byte("{}"), nil
}
func (c *keptFakeContext) Close() error { c.closed = true; return c.closeErr }

func fakeLoad() *browser.Result {
	return &browser.Result{Protocol: "h2", Load: 30 * time.Millisecond, Wall: 40 * time.Millisecond, TransferBytes: 1000,
		Negotiated: model.Negotiated{ALPN: "h2"}}
}

// keptFakes returns KeptBrowsers of fake browsers, keyed by protocol, and
// what they started and made.
func keptFakes(closeErr error) (*KeptBrowsers[*keptFake], *[]*keptFake, *[]*keptFakeContext) {
	var started []*keptFake
	var contexts []*keptFakeContext
	k := NewKeptBrowsers(KeptSpec[*keptFake]{
		Key: func(req Request, _ string) (string, error) { return req.Protocol, nil },
		Start: func(context.Context, Request, string, time.Duration) (*keptFake, error) {
			b := &keptFake{id: len(started)}
			started = append(started, b)
			return b, nil
		},
		NewContext: func(_ context.Context, b *keptFake, _ Request, _ string) (PageContext, error) {
			b.contexts++
			c := &keptFakeContext{b: b, n: b.contexts, closeErr: closeErr}
			contexts = append(contexts, c)
			return c, nil
		},
		Pool: browser.PoolOptions{
			Usage: func(pgid int) (browser.Usage, error) {
				return browser.Usage{Procs: 3, PSS: 100 << 20, RSS: 200 << 20, FDs: 50}, nil
			},
			CPU: func(int) (browser.CPUTime, error) { return browser.CPUTime{}, nil },
		},
	})
	return k, &started, &contexts
}

// TestKeptBrowsersContexts checks that samples of one launch key share a
// browser, each in a fresh context closed after it; that another key gets
// its own browser; that browser_restart: always and a key log give a
// sample a browser of its own, closed after it; and that Close ends the
// kept browsers.
func TestKeptBrowsersContexts(t *testing.T) {
	k, started, contexts := keptFakes(nil)
	load := k.Loader()
	page := func(proto, restart, keylog string) *Result {
		t.Helper()
		req := Request{Test: plan.TestPage, Protocol: proto, BrowserRestart: restart, KeyLog: keylog, Timeout: 10 * time.Second}
		res, err := load(context.Background(), req, "https://10.9.2.2:4433/page")
		if err != nil {
			t.Fatalf("%s %s %q: %v", proto, restart, keylog, err)
		}
		return res
	}
	for i := 1; i <= 3; i++ {
		res := page(model.ProtoH2, "", "")
		if res.Metrics["browser_age"] != float64(i) || len(res.Warnings) > 0 {
			t.Errorf("h2 sample %d: browser_age %v, warnings %q", i, res.Metrics["browser_age"], res.Warnings)
		}
		if res.Metrics["browser_pss_mb"] != 100 || res.Metrics["plt_ms"] != 30 {
			t.Errorf("h2 sample %d: metrics %v", i, res.Metrics)
		}
	}
	page(model.ProtoH3, browser.RestartAuto, "")
	if len(*started) != 2 || k.Len() != 2 {
		t.Fatalf("%d browsers started, %d kept; want 2 (one per key)", len(*started), k.Len())
	}
	if h2 := (*started)[0]; h2.contexts != 3 || strings.Join(h2.loads, ",") != "context,context,context" {
		t.Errorf("h2 browser: %d contexts, loads %q", h2.contexts, h2.loads)
	}
	for i, c := range *contexts {
		if !c.closed {
			t.Errorf("context %d left open", i)
		}
	}

	for _, c := range []struct{ restart, keylog string }{{browser.RestartAlways, ""}, {"", "/tmp/keys.log"}} {
		n := len(*started)
		res := page(model.ProtoH2, c.restart, c.keylog)
		if len(*started) != n+1 {
			t.Fatalf("restart %q keylog %q: no fresh browser started", c.restart, c.keylog)
		}
		fresh := (*started)[n]
		if fresh.contexts != 0 || strings.Join(fresh.loads, ",") != "browser" || fresh.closed != 1 {
			t.Errorf("restart %q keylog %q: fresh browser made %d contexts, loads %q, closed %d times; want the load in the browser, closed once",
				c.restart, c.keylog, fresh.contexts, fresh.loads, fresh.closed)
		}
		if res.Metrics["browser_age"] != 1 {
			t.Errorf("restart %q keylog %q: browser_age %v", c.restart, c.keylog, res.Metrics["browser_age"])
		}
	}
	if k.Len() != 2 {
		t.Errorf("%d browsers kept after the fresh ones, want 2", k.Len())
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if (*started)[0].closed != 1 || (*started)[1].closed != 1 || k.Len() != 0 {
		t.Errorf("Close: kept browsers closed %d and %d times, %d left", (*started)[0].closed, (*started)[1].closed, k.Len())
	}
}

// TestKeptBrowsersContextCloseFails checks that a sample whose context
// could not be closed (the browser answers) keeps its measurement and says
// so in a warning, and that the bench driver runs in a context too.
func TestKeptBrowsersContextCloseFails(t *testing.T) {
	k, _, _ := keptFakes(errors.New("no such browser context"))
	defer k.Close()
	res, err := k.Loader()(context.Background(), Request{Test: plan.TestPage, Protocol: model.ProtoH2}, "https://10.9.2.2:4433/page")
	if err != nil || res.Metrics["plt_ms"] != 30 {
		t.Fatalf("sample: %v, metrics %v", err, res.Metrics)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "closing the sample's context failed (no such browser context)") {
		t.Errorf("warnings %q", res.Warnings)
	}
	out, rep, err := k.Bench()(context.Background(), Request{Test: plan.TestTTFB, Protocol: model.ProtoH2}, "https://10.9.2.2:4433/bench")
	if err != nil || string(out) != "{}" || rep == nil || rep.Metrics["browser_age"] != 2 {
		t.Errorf("bench: %q, %v, report %+v", out, err, rep)
	}
}

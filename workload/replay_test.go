package workload

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// firstClient is the registry's first client of kind.
func firstClient(t *testing.T, kind string) string {
	t.Helper()
	for _, name := range peers.Clients() {
		if st, ok := peers.ClientStack(name); ok && st.Client.Kind == kind {
			return name
		}
	}
	t.Fatalf("the registry has no %s client", kind)
	return ""
}

func replayRequest(client string) Request {
	return Request{
		Test: plan.TestSite, Protocol: model.ProtoH3, Client: client,
		Params: plan.Params{Site: "page", Connection: plan.ConnCold},
		Target: Target{Host: "10.1.2.2", Port: 4433},
		Replay: &Replay{
			Site: "page", PageURL: "https://www.news.example/index.html?x=1",
			Hosts:   map[string]string{"www.news.example": "10.1.2.10", "cdn.example": "10.1.2.11"},
			Origins: []string{"www.news.example:443", "cdn.example:443"},
			URLs:    []string{"https://www.news.example/index.html?x=1", "https://cdn.example/a.js"},
		},
	}
}

// A browser client's sample of a recorded page maps the run's host names
// first (Executor.Resolve) and loads the recorded document's URL, not the
// server's; clients that do not load recorded pages, other tests and a
// document whose host has no address are refused before anything starts.
func TestReplaySampleDispatch(t *testing.T) {
	browserName := firstClient(t, peers.KindBrowser)
	var mapped map[string]string
	var loaded string
	e := &Executor{
		Clients: map[string]ClientImpl{browserName: {Load: func(_ context.Context, req Request, url string) (*Result, error) {
			if req.Replay == nil {
				t.Error("the loader got no replay")
			}
			loaded = url
			return &Result{Metrics: map[string]float64{"plt_ms": 1}}, nil
		}}},
		Resolve: func(h map[string]string) error { mapped = h; return nil },
	}
	for _, kind := range []string{peers.KindAudit, peers.KindFetch} {
		e.Clients[firstClient(t, kind)] = ClientImpl{} // linked, so that only the replay refuses them
	}
	res := e.Execute(context.Background(), replayRequest(browserName))
	if res.Error != "" {
		t.Fatalf("browser sample: %s", res.Error)
	}
	if loaded != "https://www.news.example/index.html?x=1" || mapped["cdn.example"] != "10.1.2.11" {
		t.Errorf("loaded %q with mapping %v", loaded, mapped)
	}

	for _, c := range []struct {
		name string
		req  func() Request
		want string
	}{
		{"audit client", func() Request { return replayRequest(firstClient(t, peers.KindAudit)) }, "does not load recorded pages"},
		{"fetch client", func() Request { return replayRequest(firstClient(t, peers.KindFetch)) }, "does not load recorded pages"},
		{"built-in warm", func() Request {
			r := replayRequest(model.ClientBuiltin)
			r.Params.Connection = plan.ConnWarm
			return r
		}, "cold only"},
		{"not the site test", func() Request {
			r := replayRequest(browserName)
			r.Test = plan.TestPage
			return r
		}, "loaded by the site test"},
		{"unmapped document", func() Request {
			r := replayRequest(browserName)
			r.Replay.PageURL = "https://elsewhere.example/"
			return r
		}, "has no address"},
	} {
		mapped, loaded = nil, ""
		res := e.Execute(context.Background(), c.req())
		if !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: error %q, want %q", c.name, res.Error, c.want)
		}
		if loaded != "" || mapped != nil {
			t.Errorf("%s: loaded %q, mapped %v: nothing should have started", c.name, loaded, mapped)
		}
	}
}

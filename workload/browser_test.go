package workload

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// TestBrowserClientsDispatch checks that chromium and lighthouse samples go
// to their own loaders with the page's URL, and that what a browser client
// cannot do fails before any loader is called.
func TestBrowserClientsDispatch(t *testing.T) {
	var calls []string
	loader := func(name string) BrowserLoader {
		return func(_ context.Context, req Request, u string) (*Result, error) {
			calls = append(calls, name+" "+u)
			return &Result{Metrics: map[string]float64{"plt_ms": 1}}, nil
		}
	}
	ex := &Executor{Clients: map[string]ClientImpl{"chromium": {Load: loader("chromium")}, "lighthouse": {Load: loader("lighthouse")}}}
	target := Target{Host: "10.9.2.2", Port: 4433}
	run := func(client, test, proto string, prm map[string]string) *Result {
		return ex.Execute(context.Background(), Request{Test: test, Protocol: proto, Client: client, Params: testParams(test, prm), Target: target})
	}
	if r := run("lighthouse", plan.TestSite, model.ProtoH3, map[string]string{"site": "site-19x1mb"}); r.Status != model.StatusOK {
		t.Fatalf("lighthouse site: %s %s", r.Status, r.Error)
	}
	if r := run("chromium", plan.TestPage, model.ProtoH2, map[string]string{"objects": "4", "size": "2KB", "connection": plan.ConnWarm}); r.Status != model.StatusOK {
		t.Fatalf("chromium page: %s %s", r.Status, r.Error)
	}
	want := []string{"lighthouse https://10.9.2.2:4433/site/site-19x1mb/", "chromium https://10.9.2.2:4433/page/4/2KB"}
	if strings.Join(calls, "|") != strings.Join(want, "|") {
		t.Errorf("calls %q, want %q", calls, want)
	}
	calls = nil
	bad := []struct {
		client, test, proto string
		prm                 map[string]string
		want                string
	}{
		{"lighthouse", plan.TestPage, model.ProtoH2, map[string]string{"connection": plan.ConnWarm}, "client lighthouse measures cold loads only"},
		{"lighthouse", plan.TestDownload, model.ProtoH2, nil, "client lighthouse runs only page and site tests, not download"},
		{"chromium", plan.TestPage, model.ProtoH1C, nil, "client chromium speaks h1, h2 and h3, not h1c"},
		{"chromium", plan.TestPage, model.ProtoH2, map[string]string{"connection": "hot"}, `connection "hot"`},
	}
	for _, b := range bad {
		r := run(b.client, b.test, b.proto, b.prm)
		if r.Status != model.StatusFailed || !strings.Contains(r.Error, b.want) {
			t.Errorf("%s %s %s %v: %s %q, want failed with %q", b.client, b.test, b.proto, b.prm, r.Status, r.Error, b.want)
		}
	}
	if len(calls) > 0 {
		t.Errorf("loaders called for bad requests: %q", calls)
	}
	r := (&Executor{Clients: map[string]ClientImpl{"chromium": {Load: loader("chromium")}}}).Execute(context.Background(),
		Request{Test: plan.TestSite, Protocol: model.ProtoH2, Client: "lighthouse", Target: target})
	if r.Status != model.StatusFailed || !strings.Contains(r.Error, "client lighthouse: not available in this agent") {
		t.Errorf("no lighthouse loader: %s %q", r.Status, r.Error)
	}
}

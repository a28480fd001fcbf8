package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// TestEveryTestRuns checks that every test plan defines has its runs here,
// and nothing else does.
func TestEveryTestRuns(t *testing.T) {
	names := plan.Tests()
	if got := slices.Sorted(maps.Keys(runs)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Errorf("tests run here %v, tests plan defines %v", got, names)
	}
	for _, name := range names {
		if len(plan.TestParams(name)) == 0 {
			t.Errorf("%s: no parameters described", name)
		}
	}
}

// TestParamsAgree checks, for every registered test, with its defaults and
// with each example value of each parameter, that plan validation accepts
// the value, that the estimate is computed from the parameters the cell
// decodes to, and that the execution of every client receives exactly
// those parameters, past the JSON of the agent's protocol.
func TestParamsAgree(t *testing.T) {
	saved := runs
	t.Cleanup(func() { runs = saved })
	for _, name := range plan.Tests() {
		infos := plan.TestParams(name)
		// A plan for each example value of each parameter, the others at
		// their defaults (a required one at its first example).
		base := map[string]string{}
		for _, pi := range infos {
			base[pi.Name] = pi.Default
			if pi.Default == "" {
				base[pi.Name] = pi.Examples[0]
			}
		}
		variants := []map[string]string{base}
		for _, pi := range infos {
			for _, v := range pi.Examples {
				if v == base[pi.Name] {
					continue
				}
				m := maps.Clone(base)
				m[pi.Name] = v
				variants = append(variants, m)
			}
		}
		for _, values := range variants {
			t.Run(name+"/"+fmt.Sprint(values), func(t *testing.T) {
				checkParamsAgree(t, saved, name, values)
			})
		}
	}
}

func checkParamsAgree(t *testing.T, saved map[string]run, test string, values map[string]string) {
	clients := []string{model.ClientBuiltin}
	if saved[test].path != nil {
		clients = append(clients, "chromium")
		if values["connection"] != plan.ConnWarm {
			clients = append(clients, "lighthouse")
		}
	}
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "scenarios: [{name: a, link: delay 10ms}]\nprotocols: [h1, h2, h3]\nclient: [%s]\ntimeout: 1m\n", strings.Join(clients, ", "))
	fmt.Fprintf(&yaml, "tests:\n  - test: %s\n    params: {", test)
	for i, pi := range plan.TestParams(test) {
		if i > 0 {
			yaml.WriteString(", ")
		}
		fmt.Fprintf(&yaml, "%s: %s", pi.Name, values[pi.Name])
	}
	yaml.WriteString("}\n")
	p, err := plan.Parse("agree.yaml", []byte(yaml.String()))
	if err != nil {
		t.Fatalf("plan validation refused\n%s: %v", yaml.String(), err)
	}
	cells, err := p.Expand()
	if err != nil || len(cells) == 0 {
		t.Fatalf("%d cells, %v", len(cells), err)
	}
	want, err := plan.DecodeParams(test, values)
	if err != nil {
		t.Fatalf("DecodeParams: %v", err)
	}
	for i := range cells {
		c := &cells[i]
		got, err := plan.CellParams(c)
		if err != nil || got != want {
			t.Fatalf("%s: CellParams %+v, %v; DecodeParams %+v", c.Key, got, err, want)
		}
		if stored, err := plan.StoredCellParams(c); err != nil || stored != got {
			t.Fatalf("%s: StoredCellParams %+v, %v", c.Key, stored, err)
		}
		est, err := p.EstimateCell(c)
		if err != nil {
			t.Fatal(err)
		}
		if fromParams, err := plan.EstimateParams(c, got, p.TimeoutFor(c)); err != nil || fromParams != est {
			t.Errorf("%s: estimate %v from the cell, %v (%v) from its parameters", c.Key, est, fromParams, err)
		}
		if received := executed(t, saved, c, got); received != got {
			t.Errorf("%s: execution received %+v, want %+v", c.Key, received, got)
		}
	}
}

// executed runs a sample of cell c with parameters p through the agent's
// JSON and the Executor, with the test's runs replaced by recorders, and
// returns the parameters the client's run received.
func executed(t *testing.T, saved map[string]run, c *model.Cell, p plan.Params) plan.Params {
	t.Helper()
	orig := saved[c.Test]
	var received plan.Params
	record := run{builtin: func(_ context.Context, _ *Executor, _ endpoint.FetchSpec, p plan.Params) (*Result, error) {
		received = p
		return &Result{}, nil
	}}
	if orig.path != nil {
		record.path = func(p plan.Params) string { received = p; return orig.path(p) }
	}
	runs = map[string]run{c.Test: record}
	defer func() { runs = saved }()
	body, err := json.Marshal(Request{Test: c.Test, Protocol: c.Protocol, Client: c.Client, Params: p,
		Target: Target{Host: "127.0.0.1", Port: 1, PlainPort: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	loaded := func(context.Context, Request, string) (*Result, error) { return &Result{}, nil }
	ex := &Executor{Clients: map[string]ClientImpl{"chromium": {Load: loaded}, "lighthouse": {Load: loaded}, "firefox": {Load: loaded}}}
	if res := ex.Execute(context.Background(), req); res.Status != model.StatusOK {
		t.Fatalf("%s: %s %s", c.Key, res.Status, res.Error)
	}
	return received
}

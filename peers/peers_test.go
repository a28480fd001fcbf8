package peers_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// TestTableCoversThePlanTests checks that the table knows every test of
// package plan and no other, so that a new test cannot go unclassified.
func TestTableCoversThePlanTests(t *testing.T) {
	for _, impl := range peers.Impls {
		for _, test := range plan.Tests() {
			if _, _, err := peers.Serves(impl, test); err != nil {
				t.Errorf("%s, %s: %v", impl, test, err)
			}
		}
	}
	if got, want := peers.Tests(peers.Quicbench), plan.Tests(); !sameSet(got, want) {
		t.Errorf("quicbench serves %v, want every plan test %v", got, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestServes(t *testing.T) {
	for _, c := range []struct {
		impl, test string
		ok         bool
	}{
		{peers.Aioquic, "upload", true},
		{peers.Aioquic, "stream", true},
		{peers.Aioquic, "site", true},
		{peers.Caddy, "site", true},
		{peers.Caddy, "download", true},
		{peers.Caddy, "upload", false},
		{peers.Caddy, "stream", false},
	} {
		ok, why, err := peers.Serves(c.impl, c.test)
		if err != nil || ok != c.ok || (!ok && why == "") {
			t.Errorf("Serves(%s, %s) = %v, %q, %v; want %v with a reason when false", c.impl, c.test, ok, why, err, c.ok)
		}
	}
	if _, _, err := peers.Serves("nginx", "download"); err == nil || !strings.Contains(err.Error(), "nginx") {
		t.Errorf("unknown impl: %v", err)
	}
	if _, _, err := peers.Serves(peers.Caddy, "nosuch"); err == nil {
		t.Error("unknown test accepted")
	}
	if got := peers.Protocols(peers.Caddy); strings.Join(got, ",") != "h1,h2,h3" {
		t.Errorf("caddy protocols %v", got)
	}
	if peers.Protocols("nginx") != nil {
		t.Error("protocols of an unknown impl")
	}
}

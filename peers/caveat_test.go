package peers_test

import (
	"strings"
	"testing"

	"github.com/quicbench/quicbench/peers"
)

// TestCaveatApplies: a caveat covers its protocol from the servers it
// names ("" standing for quicbench's own), or from every server when it
// names none.
func TestCaveatApplies(t *testing.T) {
	c := peers.Caveat{Protocol: "h3", Servers: []string{peers.Own, "other"}, Text: "x"}
	for _, x := range []struct {
		proto, server string
		want          bool
	}{
		{"h3", "", true},
		{"h3", peers.Own, true},
		{"h3", "other", true},
		{"h3", "third", false},
		{"h2", "", false},
	} {
		if got := c.Applies(x.proto, x.server); got != x.want {
			t.Errorf("%s from %q: %v, want %v", x.proto, x.server, got, x.want)
		}
	}
	if !(peers.Caveat{Protocol: "h2"}).Applies("h2", "any") {
		t.Error("a caveat naming no server does not cover every server")
	}
}

// TestCaveatValidated: a caveat's protocol must be one of the client's,
// its text non-empty and its servers stack names.
func TestCaveatValidated(t *testing.T) {
	const base = "name: demo\nclient:\n  kind: browser\n  protocols: [h2]\n  cc: {tcp: kernel}\n  caveats:\n"
	if _, err := peers.Parse([]byte(base+"    - {protocol: h2, servers: [abc], text: fine}\n"), "demo.yaml"); err != nil {
		t.Fatalf("a good caveat: %v", err)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"    - {protocol: h3, text: x}\n", "caveats[0].protocol"},
		{"    - {protocol: h2, text: \" \"}\n", "caveats[0].text"},
		{"    - {protocol: h2, servers: [\"Not A Name\"], text: x}\n", "caveats[0].servers"},
	} {
		_, err := peers.Parse([]byte(base+bad.yaml), "demo.yaml")
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one naming %s", bad.yaml, err, bad.want)
		}
	}
}

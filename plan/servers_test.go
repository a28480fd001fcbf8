package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func TestServerDimension(t *testing.T) {
	p, err := Parse("plan.yaml", []byte(`name: stacks
iterations: 2
protocols: [h2, h3]
server: [quicbench, aioquic, caddy]
scenarios:
  - name: clean
tests:
  - test: download
    params: {size: 1MB}
  - test: upload
    params: {size: 1MB}
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.Key)
		want := model.ServerQuicbench
		if i := strings.LastIndex(c.Key, "/"); !slices.Contains(model.CongestionControls, c.Key[i+1:]) {
			want = c.Key[i+1:]
		}
		if c.Server != want {
			t.Errorf("cell %s: server %q, want %q", c.Key, c.Server, want)
		}
		if !strings.HasSuffix(c.Group, strings.TrimPrefix(c.Key, c.Group[:strings.Index(c.Group, "/builtin")])[len("/"+c.Protocol):]) {
			t.Errorf("cell %s: group %s is not the key without the protocol", c.Key, c.Group)
		}
	}
	want := []string{
		"clean/download/size=1MB/h2/builtin/cubic",
		"clean/download/size=1MB/h3/builtin/cubic",
		"clean/download/size=1MB/h3/builtin/cubic/aioquic",
		"clean/download/size=1MB/h2/builtin/cubic/caddy",
		"clean/download/size=1MB/h3/builtin/cubic/caddy",
		"clean/upload/size=1MB/h2/builtin/cubic",
		"clean/upload/size=1MB/h3/builtin/cubic",
		"clean/upload/size=1MB/h3/builtin/cubic/aioquic",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	notes := strings.Join(p.Notes(), "\n")
	for _, n := range []string{
		"server caddy skipped: the caddy server cannot serve the upload test: Caddy serves static files only",
		"protocol h2 skipped for server aioquic: the aioquic server speaks only h3, not h2",
	} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
	// The plan's text names the servers, so that they count in its hash.
	if !strings.Contains(string(p.render()), "server: [quicbench, aioquic, caddy]") {
		t.Errorf("rendered plan does not name its servers:\n%s", p.render())
	}
}

// A plan that does not choose servers renders (and hashes) as before
// servers existed; naming the default server changes nothing.
func TestDefaultServerKeepsHash(t *testing.T) {
	const base = "name: h\nscenarios:\n  - name: s\ntests:\n  - test: ttfb\n"
	a, err := Parse("a.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte(base+"server: quicbench\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(a.render()), "server") {
		t.Errorf("default plan renders a server:\n%s", a.render())
	}
	if a.Hash() != b.Hash() {
		t.Errorf("hash changed by naming the default server: %s vs %s", a.Hash(), b.Hash())
	}
}

func TestServerErrors(t *testing.T) {
	for _, tc := range []struct{ name, plan, want string }{
		{"unknown server", "server: nosuch\n", `server`},
		{"caddy cannot upload", "tests:\n  - test: upload\n    server: caddy\n", "tests[0].server: \"caddy\": the caddy server cannot serve the upload test"},
		{"no server left", "server: caddy\ntests:\n  - test: stream\n", "no server can run stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "name: e\nscenarios:\n  - name: s\n" + tc.plan
			if !strings.Contains(tc.plan, "tests:") {
				text += "tests:\n  - test: ttfb\n"
			}
			_, err := Parse("plan.yaml", []byte(text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// pin is part of the plan's hash (it changes what the endpoints compete
// for) and cannot be combined with parallel testbeds.
func TestPin(t *testing.T) {
	const base = "name: h\nscenarios:\n  - name: s\ntests:\n  - test: ttfb\n"
	a, err := Parse("a.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte(base+"pin: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Pin() || !b.Pin() {
		t.Errorf("Pin() = %v, %v; want false, true", a.Pin(), b.Pin())
	}
	if a.Hash() == b.Hash() {
		t.Error("pin: true does not change the plan's hash")
	}
	_, err = Parse("c.yaml", []byte(base+"parallel: 4\npin: true\n"))
	if err == nil || !strings.Contains(err.Error(), "pin: true runs one testbed at a time") {
		t.Errorf("pin with parallel: %v", err)
	}
}

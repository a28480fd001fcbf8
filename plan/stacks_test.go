package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/peers"
)

// TestContractStacks: a plan declares a stack with the endpoint contract,
// inline or in a file it names; client: and server: may then choose it;
// its command is made absolute, is in the plan's hash and in its
// canonical text, and the plan lists it among the commands it would run.
func TestContractStacks(t *testing.T) {
	dir := t.TempDir()
	cmd, err := filepath.Abs("testdata/contract/run_endpoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(cmd), filepath.Join(dir, "mystack")); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "p.yaml")
	write := func(text string) {
		if err := os.WriteFile(planFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`name: p
protocols: [h3]
stacks:
  - name: tstack
    command: ./mystack/run_endpoint.sh
    roles: [server, client]
scenarios: [{name: a, link: "delay 5ms"}]
tests:
  - test: download
    client: [builtin, tstack]
  - test: upload
    server: [quicbench]
  - test: ttfb
    server: [quicbench, tstack]
`)
	p, err := Load(planFile)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stacks()
	if len(st) != 1 || st[0].Command != filepath.Join(dir, "mystack/run_endpoint.sh") || st[0].Server.Port != peers.ContractPort {
		t.Fatalf("stacks %+v", st)
	}
	cells, _ := p.Expand()
	var got []string
	for _, c := range cells {
		got = append(got, c.Key)
	}
	for _, want := range []string{"a/download/size=1MB/h3/tstack/cubic", "a/ttfb/size=1KB/h3/builtin/cubic/tstack"} {
		if !strings.Contains(strings.Join(got, " "), want) {
			t.Errorf("no cell %s among %v", want, got)
		}
	}
	if cmds := peers.Commands(p.Stacks()); len(cmds) != 1 || !strings.Contains(cmds[0], "run_endpoint.sh (server, client)") {
		t.Errorf("commands %v", cmds)
	}
	back, err := Parse("back.yaml", p.YAML())
	if err != nil {
		t.Fatalf("canonical text: %v\n%s", err, p.YAML())
	}
	if back.Hash() != p.Hash() {
		t.Error("the canonical text gives another hash")
	}

	// the same in a file of stacks the plan names
	if err := os.WriteFile(filepath.Join(dir, "stacks.yaml"), []byte("- name: tstack\n  command: mystack/run_endpoint.sh\n  roles: [server, client]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("name: p\nprotocols: [h3]\nstacks: stacks.yaml\nclient: tstack\nscenarios: [{name: a}]\ntests: [{test: download}]\n")
	if p2, err := Load(planFile); err != nil || len(p2.Stacks()) != 1 {
		t.Fatalf("stacks from a file: %v", err)
	}

	for _, c := range []struct{ text, want string }{
		{"stacks:\n  - name: t2\n    roles: [client]\n", "missing command"},
		{"stacks:\n  - name: t2\n    command: /nonexistent/run_endpoint.sh\n    roles: [client]\n", "no such file"},
		{"stacks:\n  - name: t2\n    command: " + cmd + "\n    roles: [peer]\n", `"peer"`},
		{"stacks:\n  - name: t2\n    command: " + cmd + "\n    roles: [client]\n    protocols: [h2]\n", `"h2"`},
		{"stacks:\n  - name: caddy\n    command: " + cmd + "\n    roles: [server]\n", "a built-in stack's"},
		{"stacks:\n  - name: t2\n    command: " + cmd + "\n    roles: [client]\n    shell: yes\n", "shell"},
		{"stacks: {name: t2}\n", "a list of stacks"},
	} {
		_, err := Parse("bad.yaml", []byte(c.text+"scenarios: [{name: a}]\ntests: [{test: ttfb}]\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.text, err, c.want)
		}
	}
}

package hostmap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
)

// TestMain runs the child of TestResolvesInPrivateNamespace when asked.
func TestMain(m *testing.M) {
	if os.Getenv("HOSTMAP_CHILD") == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// childReport is what the child found.
type childReport struct {
	Err     string            `json:"err"`
	Getent  map[string]string `json:"getent"` // name -> getent output ("" when not found)
	GoAddrs map[string]string `json:"go"`     // name -> Go resolver's answer or error
}

// child installs a mapping, changes it, and resolves names with glibc
// (getent) and Go's resolver.
func child() int {
	rep := childReport{Getent: map[string]string{}, GoAddrs: map[string]string{}}
	out := func() int {
		json.NewEncoder(os.Stdout).Encode(rep)
		return 0
	}
	if _, err := Set(map[string]string{"www.a.example": "10.1.2.10"}); err != nil {
		rep.Err = err.Error()
		return out()
	}
	if _, err := Set(map[string]string{"www.a.example": "10.1.2.11", "cdn.b.example": "10.1.2.12"}); err != nil {
		rep.Err = err.Error()
		return out()
	}
	for _, n := range []string{"www.a.example", "cdn.b.example", "unknown.example", "example.com"} {
		o, _ := exec.Command("getent", "ahostsv4", n).Output()
		rep.Getent[n] = string(o)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, n)
		cancel()
		if err != nil {
			rep.GoAddrs[n] = "error"
		} else {
			rep.GoAddrs[n] = strings.Join(addrs, ",")
		}
	}
	return out()
}

func fileHash(t *testing.T, name string) [32]byte {
	b, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestResolvesInPrivateNamespace runs a child in a testbed's client
// namespace with a mount namespace of its own: mapped names resolve to
// their addresses (the second mapping replacing the first), others fail,
// no packet crosses the emulated link meanwhile (no lookup left the
// namespace: the client's only route is the link), and the machine's own
// files are untouched.
func TestResolvesInPrivateNamespace(t *testing.T) {
	testsupport.RequireRoot(t, "needs root (namespaces and mounts)")
	if _, err := exec.LookPath("getent"); err != nil {
		testsupport.Unavailable(t, "getent (libc-bin) not installed: %v", err)
	}
	before := map[string][32]byte{}
	for _, f := range []string{HostsFile, NsswitchFile, ResolvFile} {
		before[f] = fileHash(t, f)
	}
	tb, err := netns.New(context.Background(), netns.Config{Name: fmt.Sprintf("hm%d", os.Getpid()%100000)})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	up0, down0 := tb.Counters()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := tb.Command(context.Background(), netns.Client, exe, "-test.run=^$")
	PrivateMounts(cmd.SysProcAttr)
	cmd.Env = append(os.Environ(), "HOSTMAP_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v (%s)", err, stderr.String())
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	for name, want := range map[string]string{"www.a.example": "10.1.2.11", "cdn.b.example": "10.1.2.12"} {
		if !strings.HasPrefix(rep.Getent[name], want+" ") {
			t.Errorf("getent %s: %q, want %s", name, rep.Getent[name], want)
		}
		if rep.GoAddrs[name] != want {
			t.Errorf("Go resolver %s: %q, want %s", name, rep.GoAddrs[name], want)
		}
	}
	for _, name := range []string{"unknown.example", "example.com"} {
		if rep.Getent[name] != "" || rep.GoAddrs[name] != "error" {
			t.Errorf("%s resolved: getent %q, Go %q", name, rep.Getent[name], rep.GoAddrs[name])
		}
	}
	up, down := tb.Counters()
	if up.PacketsIn != up0.PacketsIn || down.PacketsIn != down0.PacketsIn {
		t.Errorf("packets crossed the link while resolving: up %d, down %d", up.PacketsIn-up0.PacketsIn, down.PacketsIn-down0.PacketsIn)
	}
	for f, h := range before {
		if fileHash(t, f) != h {
			t.Errorf("%s changed on the machine", f)
		}
	}
}

// Set refuses to replace the files in the mount namespace of its parent
// (the test runs in go test's).
func TestRefusesSharedNamespace(t *testing.T) {
	priv, err := Private()
	if err != nil {
		t.Fatal(err)
	}
	if priv {
		testsupport.Unavailable(t, "this test process has a mount namespace of its own: the refusal needs one shared with its parent")
	}
	if _, err := Set(map[string]string{"a.example": "10.0.0.1"}); !errors.Is(err, ErrShared) {
		t.Fatalf("Set in a shared mount namespace: %v, want ErrShared", err)
	}
}

func TestCheck(t *testing.T) {
	for _, bad := range []map[string]string{{"a.example": "not-an-ip"}, {"a b": "10.0.0.1"}, {"": "10.0.0.1"}, {"x\n10.0.0.2 y": "10.0.0.1"}} {
		if err := check(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if !strings.Contains(render(map[string]string{"b.example": "10.0.0.2", "a.example": "10.0.0.1"}), "10.0.0.1 a.example\n10.0.0.2 b.example\n") {
		t.Error("render")
	}
}

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/sockdiag"
	"github.com/quicbench/quicbench/netns"
)

// TestTestbedCC brings a testbed up asked for cubic, which this host may
// not allow as a namespace default, and checks that testbed up says what
// the sockets get, that testbed exec passes the testbed's congestion
// control on (QUICBENCH_CC), and that a quicbench serve and fetch started
// by hand without --cc and without QUICBENCH_CC both run cubic, as the
// kernel reports it: fetch's TCP_INFO for the client's socket, socket
// diagnostics in the server namespace for the server's.
func TestTestbedCC(t *testing.T) {
	requireRootCLI(t)
	name := uniqueName("cc")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	type result struct {
		code        int
		out, errout string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := tbCLI(ctx, "testbed", "up", "--name", name, "--link", "delay 2ms", "--cc", "cubic", "--json")
		done <- result{c, o, e}
	}()
	var info netns.Info
	for deadline := time.Now().Add(20 * time.Second); ; {
		var err error
		if info, err = netns.Lookup(name); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("testbed up exited %d: %s %s", r.code, r.out, r.errout)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("testbed up did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { netns.Down(context.Background(), name) })
	if info.CC != "cubic" || info.DefaultCC == "" {
		t.Errorf("state: cc %q, default %q", info.CC, info.DefaultCC)
	}

	code, out, errout := tbCLI(context.Background(), "testbed", "exec", "client", "--name", name, "--", "sh", "-c", "echo $QUICBENCH_CC")
	if code != 0 || strings.TrimSpace(out) != "cubic" {
		t.Errorf("exec: QUICBENCH_CC = %q (exit %d, %s), want cubic", out, code, errout)
	}

	// quicbench serve and fetch, by hand, told nothing about cc.
	bare := []string{"env", "-u", ccEnv, cliExecEnv + "=main", os.Args[0]}
	srvCtx, srvStop := context.WithCancel(context.Background())
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		tbCLI(srvCtx, append(append([]string{"testbed", "exec", "server", "--name", name, "--"}, bare...),
			"serve", "--host", info.ServerAddr.String(), "--port", "14433", "--plain-port", "18080")...)
	}()
	defer func() { srvStop(); <-srvDone }()
	nsf, err := os.Open(info.NSPath(netns.Server))
	if err != nil {
		t.Fatal(err)
	}
	defer nsf.Close()
	// Watch the server namespace for the server's socket of the transfer.
	seen := make(chan string, 1)
	watchStop := make(chan struct{})
	go func() {
		defer close(seen)
		for {
			var socks []sockdiag.Socket
			netns.InNamespace(int(nsf.Fd()), func() (err error) {
				socks, err = sockdiag.Dump(sockdiag.IPv4, sockdiag.Connected)
				return err
			})
			for _, s := range socks {
				if s.Local.Port() == 18080 && s.Remote.Addr() == info.ClientAddr && s.State == sockdiag.Established {
					seen <- s.CC
					return
				}
			}
			select {
			case <-watchStop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var res endpoint.FetchResult
	url := "http://" + info.ServerAddr.String() + ":18080/bytes/32MB"
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, out, errout = tbCLI(context.Background(), append(append([]string{"testbed", "exec", "client", "--name", name, "--"}, bare...),
			"fetch", "--proto", "h1c", "--json", url)...)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch: exit %d: %s %s", code, out, errout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(watchStop)
	if err := json.NewDecoder(bufio.NewReader(strings.NewReader(out))).Decode(&res); err != nil || len(res.Conns) == 0 {
		t.Fatalf("fetch output %q: %v", out, err)
	}
	if got := res.Conns[0].Transport.CongestionAlgo; got != "cubic" {
		t.Errorf("fetch's socket ran %q, want cubic (namespace default %s)", got, info.DefaultCC)
	}
	if got, ok := <-seen; !ok || got != "cubic" {
		t.Errorf("serve's socket of the transfer ran %q (seen: %v), want cubic (namespace default %s)", got, ok, info.DefaultCC)
	}

	if code, out, errout := tbCLI(context.Background(), "testbed", "down", "--name", name); code != 0 {
		t.Fatalf("down: %d %q %q", code, out, errout)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("testbed up did not return after testbed down")
	}
	var up testbedJSON
	if err := json.Unmarshal([]byte(strings.SplitN(r.out, "\n", 2)[0]), &up); err != nil {
		t.Fatalf("up line %q: %v", r.out, err)
	}
	if up.CC != "cubic" || up.CCIsDefault == nil || *up.CCIsDefault != (up.DefaultCC == "cubic") || !strings.Contains(up.CCNote, "every TCP connection") {
		t.Errorf("up line: cc %q, default %q, cc_is_default %v, note %q", up.CC, up.DefaultCC, up.CCIsDefault, up.CCNote)
	}
	if !strings.Contains(r.errout, up.CCNote) {
		t.Errorf("stderr %q lacks the congestion control note", r.errout)
	}
}

func TestCCFlag(t *testing.T) {
	for _, c := range []struct {
		env, args, want string
		note            bool
	}{
		{"", "", "", false},
		{"cubic", "", "cubic", false},
		{"cubic", "--cc=cubic", "cubic", false},
		{"cubic", "--cc=bbr", "bbr", true},
		{"", "--cc=reno", "reno", false},
	} {
		var errb strings.Builder
		env := &Env{Stderr: &errb, Getenv: func(k string) string {
			if k == ccEnv {
				return c.env
			}
			return ""
		}}
		cmd := newServeCommand(env)
		var args []string
		if c.args != "" {
			args = []string{c.args}
		}
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		cc, _ := cmd.Flags().GetString("cc")
		if got := ccFlag(env, cmd, cc); got != c.want || (errb.Len() > 0) != c.note {
			t.Errorf("QUICBENCH_CC=%q %s: got %q, note %q; want %q, note %v", c.env, c.args, got, errb.String(), c.want, c.note)
		}
	}
}

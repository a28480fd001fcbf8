package firefox

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
)

// requireFirefox ends the test when Firefox or certutil is not installed.
func requireFirefox(t *testing.T) {
	t.Helper()
	if _, err := FindExe(""); err != nil {
		testsupport.Unavailable(t, "%v: install firefox-esr", err)
	}
	if _, err := exec.LookPath("certutil"); err != nil {
		testsupport.Unavailable(t, "certutil is not installed: install libnss3-tools")
	}
}

// loopServer starts quicbench's real server on 127.0.0.1 and returns its
// TLS base URL and CA.
func loopServer(t *testing.T) (base string, ca []byte) {
	t.Helper()
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return "https://" + srv.Addr(), []byte(srv.Info().CAPEM)
}

// assertClean fails the test when a profile is left in dir or a process
// of the session's group still lives.
func assertClean(t *testing.T, dir string, pgid int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ProfilePrefix) {
			t.Errorf("profile %s left behind", e.Name())
		}
	}
	if left := liveInGroup(pgid); pgid > 0 && len(left) > 0 {
		t.Errorf("processes %v of group %d still alive", left, pgid)
	}
}

func TestLoadProtocols(t *testing.T) {
	requireFirefox(t)
	base, ca := loopServer(t)
	profiles := t.TempDir()
	const objects = 4
	for _, proto := range []string{model.ProtoH3, model.ProtoH2, model.ProtoH1} {
		t.Run(proto, func(t *testing.T) {
			want, _ := browser.NextHopProtocol(proto)
			start := time.Now()
			s, err := NewSession(context.Background(), Options{Protocol: proto, URL: base + "/page/4/2KB", CAPEM: ca, ProfileDir: profiles, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			launched := time.Since(start)
			pgid := s.pgid
			res, err := s.Load(context.Background(), base+"/page/4/2KB")
			loaded := time.Since(start)
			if cerr := s.Close(); cerr != nil {
				t.Errorf("close: %v", cerr)
			}
			t.Logf("%s: launch %v, load %v, close %v", proto, launched, loaded-launched, time.Since(start)-loaded)
			assertClean(t, profiles, pgid)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if len(res.Resources) != 1+objects {
				t.Errorf("%d resources, want %d: %+v", len(res.Resources), 1+objects, res.Resources)
			}
			for _, r := range res.Resources {
				if r.Protocol != want {
					t.Errorf("%s used %q, want %q", r.Name, r.Protocol, want)
				}
			}
			m := res.Metrics()
			if res.Status != 200 || res.Negotiated.ALPN != want || res.Load <= 0 || m["ttfb_ms"] <= 0 || m["fcp_ms"] <= 0 || res.ConnectionReused {
				t.Errorf("result %+v, metrics %v", res, m)
			}
			if !strings.HasPrefix(res.Version, "Firefox/") {
				t.Errorf("version %q", res.Version)
			}
			t.Logf("%s: metrics %v", proto, m)
		})
	}
}

// TestWarmAndFallback: a second load in one session reuses the document's
// connection and fetches every object again (no cache); with the
// preference that keeps HTTP/3 for a test CA turned back on, Firefox falls
// back to TCP silently, and the protocol check fails the load; a refused
// connection is a *browser.NavigationError. No profile or process is left.
func TestWarmAndFallback(t *testing.T) {
	requireFirefox(t)
	base, ca := loopServer(t)
	profiles := t.TempDir()
	page := base + "/page/3/4KB"

	s, err := NewSession(context.Background(), Options{Protocol: model.ProtoH3, URL: page, CAPEM: ca, ProfileDir: profiles, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	pgid := s.pgid
	first, err := s.Load(context.Background(), page)
	if err != nil {
		t.Fatalf("first load: %v", err)
	}
	second, err := s.Load(context.Background(), page)
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	if first.ConnectionReused || !second.ConnectionReused {
		t.Errorf("connection reused: first %v, second %v; want false, true", first.ConnectionReused, second.ConnectionReused)
	}
	if second.CachedResources != 0 || second.BodyBytes < 3*4000 || len(second.Resources) != 4 {
		t.Errorf("second load: %d cached, %d body bytes, %d resources", second.CachedResources, second.BodyBytes, len(second.Resources))
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := s.Load(context.Background(), page); err == nil {
		t.Error("Load on a closed session succeeded")
	}
	assertClean(t, profiles, pgid)

	res, err := Load(context.Background(), Options{Protocol: model.ProtoH3, URL: page, CAPEM: ca, ProfileDir: profiles,
		Prefs: map[string]any{"network.http.http3.disable_when_third_party_roots_found": true}})
	var mm *browser.ProtocolMismatchError
	if !errors.As(err, &mm) || res == nil || browser.InvalidLoad(err) == nil {
		t.Fatalf("fallback to TCP: result %v, error %v; want a protocol mismatch", res, err)
	}
	if mm.Want != "h3" || len(mm.Mismatches) == 0 || res.Resources[0].Protocol == "h3" {
		t.Errorf("mismatch %+v, document over %q", mm, res.Resources[0].Protocol)
	}
	t.Logf("without the preference: %v", err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String() + "/"
	ln.Close()
	_, err = Load(context.Background(), Options{Protocol: model.ProtoH2, URL: closed, CAPEM: ca, ProfileDir: profiles})
	var ne *browser.NavigationError
	if !errors.As(err, &ne) || !strings.Contains(ne.ErrorText, "NS_ERROR_CONNECTION_REFUSED") {
		t.Errorf("refused connection: %v; want a NavigationError with NS_ERROR_CONNECTION_REFUSED", err)
	}
	assertClean(t, profiles, 0)
}

// TestStartTimeout: a start cut short leaves no process and no profile.
func TestStartTimeout(t *testing.T) {
	requireFirefox(t)
	profiles := t.TempDir()
	_, err := NewSession(context.Background(), Options{Protocol: model.ProtoH2, ProfileDir: profiles, StartTimeout: 300 * time.Millisecond})
	var te *browser.TimeoutError
	if !errors.As(err, &te) || te.Phase != "start" {
		t.Fatalf("error %v; want a start timeout", err)
	}
	assertClean(t, profiles, 0)
	if left := firefoxesOf(profiles); len(left) > 0 {
		t.Errorf("Firefox processes %v of %s still alive", left, profiles)
	}
}

// firefoxesOf lists live processes whose command line names a profile
// under dir.
func firefoxesOf(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		// (a zombie's command line is empty)
		if err == nil && strings.Contains(string(b), dir+"/"+ProfilePrefix) {
			pid, _ := strconv.Atoi(e.Name())
			pids = append(pids, pid)
		}
	}
	return pids
}

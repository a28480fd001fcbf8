package quiche_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/peers/quiche"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

func requireQuiche(t *testing.T) {
	t.Helper()
	st, _ := peers.Lookup(quiche.Name)
	for _, role := range st.Roles() {
		if _, _, err := peers.Check(context.Background(), st, role); err != nil {
			testsupport.Unavailable(t, "%v", err)
		}
	}
}

// TestServerSendsQuicbenchContent runs quiche's server on the loopback
// interface: it sends quicbench's page, objects and /bytes bodies byte for
// byte, runs the congestion control asked for and writes its TLS secrets
// (its connections' statistics: TestRunAcrossTestbed).
func TestServerSendsQuicbenchContent(t *testing.T) {
	requireQuiche(t)
	keys := filepath.Join(t.TempDir(), "keys.log")
	for _, cc := range []string{"cubic", "reno"} {
		p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: quiche.Name, Host: "127.0.0.1", CongestionControl: cc, KeyLogFile: keys, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		info := p.Info()
		if info.Impl != quiche.Name || !strings.HasPrefix(info.Version, "quiche ") || info.Settings["cc"] != cc || info.Port == 0 {
			p.Close()
			t.Fatalf("hello %+v (asked %s)", info, cc)
		}
		c := peertest.LoopbackClient(t, info, model.ProtoH3)
		peertest.SameContent(t, c, "https://127.0.0.1:"+strconv.Itoa(info.Port), model.ProtoH3)
		p.Close()
	}
	if b, err := os.ReadFile(keys); err != nil || !strings.Contains(string(b), "CLIENT_TRAFFIC_SECRET_0") {
		t.Fatalf("key log: %v %q", err, b)
	}
}

// TestClientFetchesFromQuicbench runs quiche's client against quicbench's
// own server on the loopback interface: a download's record, with the
// congestion control asked for.
func TestClientFetchesFromQuicbench(t *testing.T) {
	requireQuiche(t)
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info()
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	res := ex.Execute(context.Background(), workload.Request{Test: "download", Protocol: model.ProtoH3, Client: quiche.Name, CC: "reno",
		Params: plan.Params{Size: 2_000_000}, Target: workload.Target{Host: "127.0.0.1", Port: info.Port, CAPEM: info.CAPEM}})
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if res.Metrics["goodput_mbps"] <= 0 || res.Negotiated.ALPN != "h3" || len(res.Transport) != 1 || res.Transport[0].CongestionAlgo != "reno" {
		t.Fatalf("result %+v", res)
	}
}

package aioquic_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers/aioquic"
)

// TestServerStatsAccessor runs the server program's self-check, which reads
// a connection's statistics through aioquic's private attributes: a new
// aioquic release that renames them fails here.
func TestServerStatsAccessor(t *testing.T) {
	py := python(t)
	v, out, err := aioquic.CheckServer(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if v != aioquic.Version {
		t.Fatalf("the venv holds aioquic %s, want the pinned %s", v, aioquic.Version)
	}
	var got struct {
		Stats struct {
			CC          string `json:"cc"`
			Cwnd        int64  `json:"cwnd"`
			PacketsSent int64  `json:"packets_sent"`
			PTOCount    int64  `json:"pto_count"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("self-check output %q: %v", out, err)
	}
	st := got.Stats
	if st.CC != "cubic" || st.Cwnd <= 0 || st.PacketsSent < 1 || st.PTOCount < 1 {
		t.Fatalf("statistics read through the accessors: %+v", st)
	}
}

// TestServerSendsQuicbenchContent runs the server on the loopback interface
// and checks that it sends the same page, objects and /bytes bodies as
// quicbench's own server, what its hello says, that it runs the
// congestion control asked for, that it reads a connection still open
// (peertest.OpenConnectionStats), and that Close leaves no process.
func TestServerSendsQuicbenchContent(t *testing.T) {
	python(t)
	for _, cc := range []string{"cubic", "reno"} {
		p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: aioquic.Name, Host: "127.0.0.1", CongestionControl: cc, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		info := p.Info()
		if info.Impl != aioquic.Name || info.Version != "aioquic "+aioquic.Version || strings.Join(info.Protocols, ",") != "h3" ||
			info.Settings["cc"] != cc || p.QUICCC() != cc || info.Settings["max_datagram_size"] != strconv.Itoa(endpoint.PeerMaxDatagramSize) || info.Port == 0 {
			p.Close()
			t.Fatalf("hello %+v (asked %s)", info, cc)
		}
		peertest.SameContent(t, peertest.LoopbackClient(t, info, model.ProtoH3), "https://127.0.0.1:"+strconv.Itoa(info.Port), model.ProtoH3)
		peertest.OpenConnectionStats(t, p, info, cc)
		if _, err := p.ConnStats(context.Background(), "tcp", "127.0.0.1:1"); err == nil {
			t.Fatal("aioquic gave statistics of a TCP connection")
		}
		cpu, err := p.CPU()
		if err != nil || cpu.User+cpu.Sys <= 0 {
			t.Fatalf("CPU %+v, %v", cpu, err)
		}
		pid := p.ProcessID()
		p.Close()
		if err := syscall.Kill(pid, 0); err == nil {
			t.Fatalf("aioquic process %d still exists after Close", pid)
		}
	}
	// bbr is not aioquic's: it runs its default and says so
	p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: aioquic.Name, Host: "127.0.0.1", CongestionControl: "bbr", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.QUICCC() != "cubic" || p.Info().Settings["cc"] != "cubic" {
		t.Fatalf("asked bbr: runs %s, hello %v", p.QUICCC(), p.Info().Settings)
	}
}

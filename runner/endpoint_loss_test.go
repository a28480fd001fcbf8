package runner

import (
	"slices"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

func TestEndpointLoss(t *testing.T) {
	quic := func(side string, sent, lost int64) model.TransportStats {
		return model.TransportStats{Kind: "quic", Side: side, PacketsSent: sent, PacketsLost: lost}
	}
	h3 := &model.Cell{Protocol: model.ProtoH3, Client: model.ClientBuiltin}
	const (
		down1715 = "down: the QUIC sender (server) declared 1715 packets lost where the link dropped 0: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the client could not keep up"
		up72     = "up: the QUIC sender (client) declared 72 packets lost where the link dropped 0: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the server could not keep up"
	)
	for _, c := range []struct {
		name     string
		cell     *model.Cell
		s        model.Sample
		outside  [2]int64
		want     []string
		wantNone bool
	}{
		{name: "download, receiver overflowed", cell: h3,
			s:    model.Sample{Transport: []model.TransportStats{quic("client", 900, 0), quic("server", 20000, 1715)}},
			want: []string{down1715}},
		{name: "upload, receiver overflowed; the client's Side may be empty", cell: h3,
			s:    model.Sample{Transport: []model.TransportStats{quic("", 5000, 72), quic("server", 400, 0)}},
			want: []string{up72}},
		{name: "raw QUIC, both directions", cell: &model.Cell{Protocol: model.ProtoQUIC, Client: model.ClientBuiltin},
			s:    model.Sample{Transport: []model.TransportStats{quic("client", 5000, 72), quic("server", 20000, 1715)}},
			want: []string{up72, down1715}},
		{name: "any client: Chromium, with the server's statistics only", cell: &model.Cell{Protocol: model.ProtoH3, Client: "chromium"},
			s:    model.Sample{Transport: []model.TransportStats{quic("server", 20000, 1715)}},
			want: []string{down1715}},
		{name: "connections summed", cell: h3,
			s: model.Sample{Transport: []model.TransportStats{quic("server", 10000, 1000), quic("server", 10000, 715),
				quic("client", 500, 3), quic("client", 500, 4)}},
			want: []string{down1715}},
		// every kind of drop on the way counts: 5+6+7+8+1 in the link, 3 outside
		{name: "drops of every cause subtracted, 11 more than the 30 dropped", cell: h3,
			s: model.Sample{Transport: []model.TransportStats{quic("server", 1000, 41)},
				LinkDown: emu.Counters{DropLoss: 5, DropQueue: 6, DropCorrupt: 7, DropOff: 8, DropFlush: 1}},
			outside: [2]int64{0, 3},
			want:    []string{"down: the QUIC sender (server) declared 41 packets lost where the link dropped 30: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the client could not keep up"}},
		{name: "10 more than the link dropped: the least threshold", cell: h3,
			s: model.Sample{Transport: []model.TransportStats{quic("server", 1000, 40)},
				LinkDown: emu.Counters{DropLoss: 5, DropQueue: 6, DropCorrupt: 7, DropOff: 8, DropFlush: 1}},
			outside: [2]int64{0, 3}, wantNone: true},
		{name: "0.5% of 10000 sent: 50 more is noise", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("server", 10000, 250)}, LinkDown: emu.Counters{DropLoss: 200}},
			wantNone: true},
		{name: "0.5% of 10000 sent: 51 more is not", cell: h3,
			s:    model.Sample{Transport: []model.TransportStats{quic("server", 10000, 251)}, LinkDown: emu.Counters{DropLoss: 200}},
			want: []string{"down: the QUIC sender (server) declared 251 packets lost where the link dropped 200: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the client could not keep up"}},
		{name: "fewer declared than dropped", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("server", 10000, 150)}, LinkDown: emu.Counters{DropLoss: 200}},
			wantNone: true},
		{name: "the link reordered: spurious losses, nothing said", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("server", 20000, 1715)}, LinkDown: emu.Counters{Reordered: 1}},
			wantNone: true},
		{name: "reordering in one direction only silences that one", cell: h3,
			s:    model.Sample{Transport: []model.TransportStats{quic("client", 5000, 72), quic("server", 20000, 1715)}, LinkUp: emu.Counters{Reordered: 3}},
			want: []string{down1715}},
		{name: "no server statistics", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("client", 900, 0)}},
			wantNone: true},
		{name: "no statistics at all (a failed sample)", cell: h3,
			s: model.Sample{Status: model.StatusFailed}, wantNone: true},
		{name: "a connection without statistics (zero value)", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{{}, {Side: "server"}}},
			wantNone: true},
		{name: "losses not measured", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("server", 10000, 1000), quic("server", 10000, model.NotMeasured)}},
			wantNone: true},
		{name: "packets sent not measured", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{quic("server", model.NotMeasured, 1715)}},
			wantNone: true},
		{name: "drops outside the link not known", cell: h3,
			s:       model.Sample{Transport: []model.TransportStats{quic("client", 5000, 72), quic("server", 20000, 1715)}},
			outside: [2]int64{0, model.NotMeasured}, want: []string{up72}},
		{name: "TCP sample: never", cell: &model.Cell{Protocol: model.ProtoH2, Client: model.ClientBuiltin},
			s: model.Sample{Transport: []model.TransportStats{
				{Kind: "tcp", Side: "client", PacketsSent: 5000, PacketsLost: 72},
				{Kind: "tcp", Side: "server", PacketsSent: 20000, PacketsLost: 1715}}},
			wantNone: true},
		{name: "raw TCP sample with QUIC-looking statistics: never", cell: &model.Cell{Protocol: model.ProtoTCP, Client: model.ClientBuiltin},
			s:        model.Sample{Transport: []model.TransportStats{quic("server", 20000, 1715)}},
			wantNone: true},
		{name: "TCP statistics in a QUIC sample are not counted", cell: h3,
			s:        model.Sample{Transport: []model.TransportStats{{Kind: "tcp", Side: "server", PacketsSent: 20000, PacketsLost: 1715}}},
			wantNone: true},
	} {
		got := endpointLoss(c.cell, &c.s, c.outside)
		if c.wantNone && len(got) != 0 || !c.wantNone && !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got  %q\n want %q", c.name, got, c.want)
		}
	}
}

func TestOutsideDrops(t *testing.T) {
	base := forward.Stats{PoolEmpty: 5, Oversize: 1, Malformed: 2, WriteErrors: 3, Reads: 100}
	fw0 := [2]forward.Stats{base, base}
	if got := outsideDrops(false, [2]uint64{}, fw0, fw0); got != [2]int64{model.NotMeasured, model.NotMeasured} {
		t.Errorf("device counters unknown: %v", got)
	}
	if got := outsideDrops(true, [2]uint64{}, fw0, fw0); got != [2]int64{0, 0} {
		t.Errorf("nothing dropped: %v", got)
	}
	up, down := base, base
	up.PoolEmpty += 4
	up.Oversize += 2
	up.WriteErrors++
	up.Reads += 1000
	down.Malformed++
	down.PoolEmpty += 9
	if got := outsideDrops(true, [2]uint64{10, 20}, fw0, [2]forward.Stats{up, down}); got != [2]int64{17, model.NotMeasured} {
		t.Errorf("got %v, want [17 NotMeasured]: 10 device + 4 pool + 2 oversize + 1 refused up; a malformed super-packet down", got)
	}
}

func TestUDPReceiveWarnings(t *testing.T) {
	ok := [2]bool{true, true}
	a := udpDrops{n: [2]uint64{100, 200}, ok: ok}
	if w := udpReceiveWarnings(a, a); len(w) != 0 {
		t.Errorf("unchanged: %q", w)
	}
	b := udpDrops{n: [2]uint64{137, 201}, ok: ok}
	want := []string{
		"client namespace: 37 UDP datagrams dropped because the receiving socket's buffer was full (UdpRcvbufErrors)",
		"server namespace: 1 UDP datagrams dropped because the receiving socket's buffer was full (UdpRcvbufErrors)",
	}
	if got := udpReceiveWarnings(a, b); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// A side that could not be read before or after says nothing.
	bad := b
	bad.ok[netns.Server] = false
	if got := udpReceiveWarnings(a, bad); !slices.Equal(got, want[:1]) {
		t.Errorf("server unread after: %q", got)
	}
	bad = a
	bad.ok[netns.Client] = false
	if got := udpReceiveWarnings(bad, b); !slices.Equal(got, want[1:]) {
		t.Errorf("client unread before: %q", got)
	}
}

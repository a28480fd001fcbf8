package calibrate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, probePayload)
	putHeader(b, kindLoad, 9, 1<<40+3, 123456789012)
	kind, phase, seq, ts, ok := parseHeader(b)
	if !ok || kind != kindLoad || phase != 9 || seq != 1<<40+3 || ts != 123456789012 {
		t.Fatalf("parseHeader = %d %d %d %d %v", kind, phase, seq, ts, ok)
	}
	if _, _, _, _, ok := parseHeader(b[:headerLen-1]); ok {
		t.Fatal("short payload accepted")
	}
	b[0] = 'X'
	if _, _, _, _, ok := parseHeader(b); ok {
		t.Fatal("foreign payload accepted")
	}
}

func probeDatagram(phase byte, seq uint64) []byte {
	b := make([]byte, probePayload)
	putHeader(b, kindProbe, phase, seq, 0)
	return b
}

func TestCollector(t *testing.T) {
	c := newCollector(3, 5, 0)
	// Arrival order 0 2 1 1(dup) 4 3; plus a probe of another phase, one
	// out of range and a load packet.
	for i, seq := range []uint64{0, 2, 1, 1, 4, 3} {
		c.add(probeDatagram(3, seq), int64(100+i))
	}
	c.add(probeDatagram(2, 0), 200)
	c.add(probeDatagram(3, 5), 201)
	load := make([]byte, bulkPayload)
	putHeader(load, kindLoad, 3, 0, 0)
	c.add(load, 300)
	c.add(load, 310)
	if c.late != 2 { // 1 after 2, 3 after 4
		t.Errorf("late = %d, want 2", c.late)
	}
	if c.probes[1].copies != 2 || c.probes[1].rx != 102 || c.probes[3].rx != 105 {
		t.Errorf("probes = %+v", c.probes)
	}
	if c.stray != 2 {
		t.Errorf("stray = %d, want 2", c.stray)
	}
	if c.bulkPackets != 2 || c.bulkBytes != 2*(bulkPayload+ipUDPOverhead) || c.bulkFirst != 300 || c.bulkLast != 310 || c.bulkFirstSize != 1500 {
		t.Errorf("bulk: %d packets, %d bytes, %d..%d", c.bulkPackets, c.bulkBytes, c.bulkFirst, c.bulkLast)
	}
}

func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafePointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestParseCmsgs(t *testing.T) {
	ts := make([]byte, 16)
	binary.NativeEndian.PutUint64(ts[0:], 1700000000)
	binary.NativeEndian.PutUint64(ts[8:], 123456789)
	ov := binary.NativeEndian.AppendUint32(nil, 42)
	b := append(cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, ov), cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, ts)...)
	b = append(b, cmsg(unix.SOL_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint32(nil, 1472))...)
	rx, ok, ovfl, gso := parseCmsgs(b)
	if !ok || rx != 1700000000*1e9+123456789 || ovfl != 42 || gso != 1472 {
		t.Fatalf("parseCmsgs = %d %v %d %d", rx, ok, ovfl, gso)
	}
	if _, ok, _, gso := parseCmsgs(cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, ov)); ok || gso != 0 {
		t.Fatal("a timestamp or segment size found where there is none")
	}
	if _, ok, _, _ := parseCmsgs(b[:5]); ok {
		t.Fatal("truncated control data parsed")
	}
}

func sampleReport() *Report {
	return &Report{
		Up: "delay 25ms", Down: "delay 25ms", Seed: 1, CC: "cubic", Packets: 20000, Duration: "3s", Realtime: true,
		Timestamping: timestampingMethod,
		Figures: []Figure{
			{Name: "floor: one-way delay over veth p50", Unit: "us", Measured: 2.1, Tolerance: "-", Status: StatusInfo},
			judge(Figure{Direction: "up", Name: "delay p50 idle", Unit: "ms", Configured: ptr(25), Measured: 25.017, Tolerance: "±50 us"}, 0.05),
			judge(Figure{Direction: "down", Name: "delay p99 idle", Unit: "ms", Configured: ptr(25), Measured: 25.4, Tolerance: "±150 us"}, 0.15),
			proportion("loss", 0.02, 400, 20000, true),
		},
		Goodput: []Goodput{{Proto: "quic", EmulatedBps: 1.9e9, VethBps: 2.1e9, Ratio: 1.9 / 2.1, EmulatedReceiveDrops: 12}},
		CPU: []CPU{{Load: "TCP paced at 100 Mbit/s", GoodputBps: 99.9e6, CorePercent: 12.5, MachinePercent: 40.25,
			Baseline: "veth", VethMachinePercent: 30.5, VethGoodputBps: 99.8e6, NetPercent: 9.72, SyscallsPerPacket: 1.234, WakeupsPerPacket: 0.5},
			{Load: "TCP through delay", GoodputBps: 99e6, CorePercent: 11, MachinePercent: 25.5}},
	}
}

func TestReportTable(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`link up "delay 25ms", down "delay 25ms", seed 1`,
		"emulator threads: SCHED_FIFO",
		"up    delay p50 idle",
		"25.000 ms",
		"25.017 ms",
		"2.000% [1.810%, 2.204%]",
		"quic      1.900 Gbit/s   2.100 Gbit/s  90.5%",
		"receiver socket dropped 12 datagrams (emulated)",
		"12.5%",
		"  TCP paced at 100 Mbit/s: 99.9 Mbit/s arrived\n" +
			"    emulator's own cost 9.7%: CPU taken from a soaker 40.2% through it, 30.5% for the same over veth (99.8 Mbit/s, scaled)\n" +
			"    forwarding threads 12.5% (with the endpoints' kernel work done in their system calls); per wire packet 1.23 system calls, 0.50 wake-ups\n",
		"  TCP through delay: 99.0 Mbit/s arrived\n    CPU taken from a soaker 25.5%, endpoints included (no baseline: nothing here does what this link does without the emulator)\n",
		"FAIL: 1 figures outside tolerance: down delay p99 idle",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if f := r.Failed(); len(f) != 1 || f[0].Name != "delay p99 idle" {
		t.Errorf("Failed = %+v", f)
	}
	r.Figures = r.Figures[:2]
	b.Reset()
	_ = r.WriteTable(&b)
	if !strings.Contains(b.String(), "OK: every judged figure is within its tolerance") {
		t.Errorf("passing report:\n%s", b.String())
	}
}

func TestReportJSON(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Figures) != 4 || back.Figures[1].Configured == nil || *back.Figures[1].Configured != 25 || back.Figures[0].Configured != nil ||
		back.Figures[3].Low == nil || back.Goodput[0].EmulatedReceiveDrops != 12 {
		t.Fatalf("round trip lost data: %+v", back)
	}
}

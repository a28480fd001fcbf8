package offload

import "testing"

// cpuMeter reports CPU nanoseconds per unit alongside wall time.
type cpuMeter struct {
	unlock func()
	start  int64
	ok     bool
}

func startCPU() *cpuMeter {
	m := &cpuMeter{unlock: lockThread()}
	d, ok := threadCPU()
	m.start, m.ok = d.Nanoseconds(), ok
	return m
}

func (m *cpuMeter) report(b *testing.B, units int, unit string) {
	d, ok := threadCPU()
	m.unlock()
	if ok && m.ok && units > 0 {
		b.ReportMetric(float64(d.Nanoseconds()-m.start)/float64(units), "cpu-ns/"+unit)
	}
}

func benchSegment(b *testing.B, hdr VirtioNetHdr, super []byte) {
	segs, sizes := bufs(64, 1500), make([]int, 64)
	b.SetBytes(int64(len(super)))
	b.ReportAllocs()
	var n int
	cpu := startCPU()
	for b.Loop() {
		var err error
		if n, err = Segment(hdr, super, segs, sizes); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b, b.N, "op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/segment")
}

// BenchmarkSegmentTCPv4_64KB: one 64 KB TSO super-packet into 46 segments.
func BenchmarkSegmentTCPv4_64KB(b *testing.B) {
	hdr, super := toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK, opts: tcpOpts, payload: pattern(0, 65535-52)}), GSOTCPv4, 1448)
	benchSegment(b, hdr, super)
}

// BenchmarkSegmentTCPv6_64KB: the same over IPv6.
func BenchmarkSegmentTCPv6_64KB(b *testing.B) {
	hdr, super := toSuper(buildTCP(tcpSpec{f: flowA6, seq: 1, flags: tcpACK, opts: tcpOpts, payload: pattern(0, 65535-32)}), GSOTCPv6, 1428)
	benchSegment(b, hdr, super)
}

// BenchmarkSegmentUDP_52x1232: a quic-go style USO send of 52 datagrams
// (the most that fit in 64 KB).
func BenchmarkSegmentUDP_52x1232(b *testing.B) {
	hdr, super := toSuper(buildUDP(udpSpec{f: flowA6, payload: pattern(0, 52*1232)}), GSOUDPL4, 1232)
	benchSegment(b, hdr, super)
}

func benchCoalesce(b *testing.B, wire [][]byte, wantOut int) {
	arena, out := make([]byte, arenaSize(wire)), make([][]byte, len(wire))
	total := 0
	for _, p := range wire {
		total += len(p)
	}
	var c Coalescer
	b.SetBytes(int64(total))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		n, err := c.Coalesce(wire, arena, out)
		if err != nil || n != wantOut {
			b.Fatalf("n %d err %v", n, err)
		}
	}
	cpu.report(b, b.N, "op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(wire)), "ns/packet")
}

// BenchmarkCoalesceTCPv4_45: a burst of 45 MSS segments into one 64 KB
// super-packet (the inverse of BenchmarkSegmentTCPv4_64KB).
func BenchmarkCoalesceTCPv4_45(b *testing.B) {
	benchCoalesce(b, tcpStream(flowA4, 1, 1, 1448, 45, 0, 0), 1)
}

// BenchmarkCoalesceMixed_4flows: 64 packets of two TCP and two UDP flows,
// interleaved.
func BenchmarkCoalesceMixed_4flows(b *testing.B) {
	t4 := tcpStream(flowA4, 1, 1, 1448, 16, 0, 0)
	t6 := tcpStream(flowA6, 1, 1, 1428, 16, 0, 0)
	var wire [][]byte
	for i := range 16 {
		wire = append(wire, t4[i], t6[i],
			buildUDP(udpSpec{f: flowB4, id: uint16(i), payload: pattern(i, 1200)}),
			buildUDP(udpSpec{f: flowB6, payload: pattern(i, 1200)}))
	}
	benchCoalesce(b, wire, 4)
}

// BenchmarkCoalesceSingles: 64 packets that cannot merge (pure ACKs), the
// worst case per packet.
func BenchmarkCoalesceSingles(b *testing.B) {
	var wire [][]byte
	for i := range 64 {
		wire = append(wire, buildTCP(tcpSpec{f: flowA4, id: uint16(i), seq: 1, ack: uint32(i * 1448), flags: tcpACK, opts: tcpOpts}))
	}
	benchCoalesce(b, wire, 64)
}

func BenchmarkChecksum1500(b *testing.B) {
	p := pattern(0, 1500)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		_ = fold(sum(p, 0))
	}
	cpu.report(b, b.N, "op")
}

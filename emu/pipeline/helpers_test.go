package pipeline

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

const ms = emu.Time(time.Millisecond)
const us = emu.Time(time.Microsecond)

func newTestPool() *emu.Pool { return emu.NewPool(8192, 1600) }

// build parses s and builds a pipeline with seed and a fresh pool.
func build(t testing.TB, s string, seed uint64) (*Pipeline, *emu.Pool) {
	t.Helper()
	l, err := spec.Parse(s)
	if err != nil {
		t.Fatalf("spec %q: %v", s, err)
	}
	pool := newTestPool()
	p, err := New(l, seed, pool)
	if err != nil {
		t.Fatalf("New(%q): %v", s, err)
	}
	return p, pool
}

// mkpkt returns an IPv4 packet (20-byte header) of size bytes (>= 20)
// carrying id in its address fields (bytes 12..19), which corruption spares.
func mkpkt(t testing.TB, pool *emu.Pool, id uint64, size int) *emu.Packet {
	t.Helper()
	pkt := pool.Get()
	if pkt == nil {
		t.Fatal("pool exhausted")
	}
	pkt.Data = pkt.Data[:size]
	copy(pkt.Data, payload[:])
	pkt.Data[0] = 0x45
	binary.BigEndian.PutUint16(pkt.Data[2:], uint16(size))
	binary.BigEndian.PutUint64(pkt.Data[12:], id)
	return pkt
}

// payload is the deterministic content of every test packet.
var payload = func() (b [2048]byte) {
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

func idOf(pkt *emu.Packet) uint64 { return binary.BigEndian.Uint64(pkt.Data[12:]) }

// arrival is one packet offered to a pipeline.
type arrival struct {
	at   emu.Time
	id   uint64
	size int
}

// delivery is one packet out of a pipeline.
type delivery struct {
	at   emu.Time
	id   uint64
	data []byte
}

// drive offers the arrivals (sorted by time) and dequeues every packet at
// exactly the time NextDeadline announces, so each delivery time is the
// packet's exact delivery time. When exact is set it also checks that
// NextDeadline is exact: nothing is due a nanosecond earlier, and Dequeue
// at the deadline returns a packet. Packets are returned to the pool.
func drive(t testing.TB, p *Pipeline, pool *emu.Pool, arrivals []arrival, exact bool) []delivery {
	t.Helper()
	var out []delivery
	i := 0
	for {
		dl, ok := p.NextDeadline()
		if i < len(arrivals) && (!ok || arrivals[i].at < dl) {
			a := arrivals[i]
			p.Enqueue(a.at, mkpkt(t, pool, a.id, a.size))
			i++
			continue
		}
		if !ok {
			return out
		}
		if exact && dl > p.last {
			if pkt := p.Dequeue(dl - 1); pkt != nil {
				t.Fatalf("packet %d delivered at %d, before the deadline %d", idOf(pkt), dl-1, dl)
			}
		}
		got := 0
		for pkt := p.Dequeue(dl); pkt != nil; pkt = p.Dequeue(dl) {
			out = append(out, delivery{at: dl, id: idOf(pkt), data: append([]byte(nil), pkt.Data...)})
			pool.Put(pkt)
			got++
		}
		if got == 0 {
			if exact {
				t.Fatalf("NextDeadline said %d but Dequeue returned nothing", dl)
			}
			if next, ok2 := p.NextDeadline(); ok2 && next == dl {
				t.Fatalf("NextDeadline stuck at %d with nothing due", dl)
			}
		}
	}
}

// deliverN builds link s (seed 1), drives arrivals through it (see drive)
// and fails unless want packets are delivered.
func deliverN(t testing.TB, s string, arrivals []arrival, exact bool, want int) (*Pipeline, []delivery) {
	t.Helper()
	p, pool := build(t, s, 1)
	got := drive(t, p, pool, arrivals, exact)
	if len(got) != want {
		t.Fatalf("delivered %d, want %d", len(got), want)
	}
	return p, got
}

// every returns n arrivals of size bytes, gap apart from start, ids from 0.
func every(n int, start, gap emu.Time, size int) []arrival {
	a := make([]arrival, n)
	for i := range a {
		a[i] = arrival{at: start + emu.Time(i)*gap, id: uint64(i), size: size}
	}
	return a
}

// checkInvariant checks that every packet is accounted for.
func checkInvariant(t testing.TB, p *Pipeline) {
	t.Helper()
	p.publish()
	c := p.Counters()
	in := c.PacketsIn + c.Duplicated
	out := c.PacketsOut + c.DropLoss + c.DropQueue + c.DropOff + c.DropMTU + c.DropFlush + uint64(p.Len())
	if in != out {
		t.Fatalf("accounting: in %d + duplicated %d != out %d + loss %d + queue %d + off %d + mtu %d + flush %d + held %d",
			c.PacketsIn, c.Duplicated, c.PacketsOut, c.DropLoss, c.DropQueue, c.DropOff, c.DropMTU, c.DropFlush, p.Len())
	}
}

// binomialBounds returns the 99.9% two-sided normal-approximation interval
// of a Binomial(n, p) count.
func binomialBounds(n int, p float64) (lo, hi float64) {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return mean - 3.29*sd, mean + 3.29*sd
}

// writeTrace writes a trace file and returns its path.
func writeTrace(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "link.trace")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

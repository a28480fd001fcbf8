package pipeline

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

var mixedSpecs = []string{
	"",
	"delay 25ms",
	"delay 10ms 5ms",
	"delay 10ms 5ms 30% distribution normal loss 1% duplicate 1% corrupt 1% reorder 10% gap 2",
	"rate 10mbit",
	"delay 5ms rate 20mbit 14 limit 50",
	"delay 5ms 2ms distribution pareto rate 20mbit queue droptail bytes 20000",
	"rate 10mbit queue codel",
	"loss gemodel 1% 20% 50% 0.1% rate 50mbit delay 1ms",
	"onoff 30ms 10ms delay 2ms",
	"onoff 30ms 10ms rate 5mbit",
	"duplicate 50% 20% reorder 50% delay 3ms rate 30mbit",
}

// randomTraffic is a mix of bursts and gaps with sizes from 20 to 1500.
func randomTraffic(n int, seed uint64) []arrival {
	r := rand.New(rand.NewPCG(seed, 1))
	a := make([]arrival, n)
	t := emu.Time(1000)
	for i := range a {
		if r.IntN(10) == 0 {
			t += emu.Time(r.IntN(int(5 * ms)))
		} else {
			t += emu.Time(r.IntN(int(200 * us)))
		}
		a[i] = arrival{at: t, id: uint64(i), size: 20 + r.IntN(1481)}
	}
	return a
}

// TestNextDeadlineIsExact drives every spec checking that nothing is due a
// nanosecond before NextDeadline and something is due at it (except for
// CoDel and reorder behind a rate, where it is a lower bound), and that
// every packet is accounted for.
func TestNextDeadlineIsExact(t *testing.T) {
	tr := writeTrace(t, "0\n1\n1\n3\n3\n3\n4\n")
	for _, s := range append(mixedSpecs, "trace "+tr, "delay 3ms 1ms trace "+tr+" onoff 20ms 5ms limit 30",
		"trace "+tr+" queue codel", "reorder 20% delay 2ms trace "+tr) {
		p, pool := build(t, s, 77)
		exact := p.link.Queue != spec.QueueCoDel && !(p.reorderOn && p.bn.kind != bnNone)
		drive(t, p, pool, randomTraffic(3000, 5), exact)
		checkInvariant(t, p)
		if p.Len() != 0 {
			t.Fatalf("%q: %d packets left after draining", s, p.Len())
		}
		if pool.Available() != pool.Cap() {
			t.Fatalf("%q: %d packets leaked from the pool", s, pool.Cap()-pool.Available())
		}
	}
}

func TestFlush(t *testing.T) {
	for _, s := range append(mixedSpecs, "delay 3ms trace "+writeTrace(t, "1\n2\n")) {
		p, pool := build(t, s, 3)
		for i, a := range randomTraffic(500, 9) {
			p.Enqueue(a.at, mkpkt(t, pool, uint64(i), a.size))
		}
		held := p.Len()
		before := p.Counters()
		p.Flush()
		c := p.Counters()
		if p.Len() != 0 || c.DropFlush-before.DropFlush != uint64(held) {
			t.Fatalf("%q: held %d, after Flush Len %d DropFlush %d", s, held, p.Len(), c.DropFlush)
		}
		if pool.Available() != pool.Cap() {
			t.Fatalf("%q: Flush leaked %d packets", s, pool.Cap()-pool.Available())
		}
		if _, ok := p.NextDeadline(); ok {
			t.Fatalf("%q: deadline after Flush", s)
		}
		checkInvariant(t, p)
		// The link still works afterwards.
		drive(t, p, pool, []arrival{{1 << 40, 1, 100}}, false)
		checkInvariant(t, p)
	}
}

func TestTimeGoingBackIsClamped(t *testing.T) {
	p, pool := build(t, "delay 10ms", 1)
	p.Enqueue(100*ms, mkpkt(t, pool, 1, 100))
	p.Enqueue(50*ms, mkpkt(t, pool, 2, 100)) // treated as 100 ms
	if pkt := p.Dequeue(109 * ms); pkt != nil {
		t.Fatal("delivered early")
	}
	a, b := p.Dequeue(110*ms), p.Dequeue(10*ms) // 10 ms is treated as 110 ms
	if a == nil || b == nil || idOf(a) != 1 || idOf(b) != 2 {
		t.Fatalf("got %v %v", a, b)
	}
}

// TestLateOut: a packet taken out of the link more than LateThreshold
// after its departure time counts as late, one taken at its time or up
// to the threshold after it does not; a driver in virtual time, taking
// every packet at NextDeadline, is never late.
func TestLateOut(t *testing.T) {
	p, pool := build(t, "delay 10ms", 1)
	for i, at := range []emu.Time{0, 1 * ms, 2 * ms} {
		p.Enqueue(at, mkpkt(t, pool, uint64(i), 100))
	}
	for _, at := range []emu.Time{10 * ms, 11*ms + emu.LateThreshold, 12*ms + emu.LateThreshold + 1} {
		pkt := p.Dequeue(at)
		if pkt == nil {
			t.Fatalf("nothing due at %v", at)
		}
		pool.Put(pkt)
	}
	p.NextDeadline() // publishes the counters, as a driver about to sleep does
	if c := p.Counters(); c.PacketsOut != 3 || c.LateOut != 1 {
		t.Errorf("PacketsOut %d, LateOut %d; want 3 and 1 (the last packet, 1 ns past the threshold)", c.PacketsOut, c.LateOut)
	}
	for _, s := range mixedSpecs {
		p, pool := build(t, s, 9)
		drive(t, p, pool, randomTraffic(2000, 3), false)
		if c := p.Counters(); c.LateOut != 0 || c.PacketsOut == 0 {
			t.Errorf("%q in virtual time: %d of %d packets late", s, c.LateOut, c.PacketsOut)
		}
	}
}

func TestNilPacketAndNilPool(t *testing.T) {
	p, _ := build(t, "delay 1ms", 1)
	p.Enqueue(0, nil)
	if p.Len() != 0 || p.Counters().PacketsIn != 0 {
		t.Fatal("nil packet was counted")
	}
	if _, err := New(spec.Link{}, 1, nil); err == nil {
		t.Fatal("New with a nil pool succeeded")
	}
	if _, err := New(spec.Link{Rate: 1, Trace: "x"}, 1, newTestPool()); err == nil {
		t.Fatal("New with rate and trace succeeded")
	}
}

func TestCountersFromAnotherGoroutine(t *testing.T) {
	p, pool := build(t, "delay 1ms loss 1% rate 100mbit", 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		var prev emu.Counters
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := p.Counters()
			if c.PacketsIn < prev.PacketsIn || c.PacketsOut < prev.PacketsOut {
				t.Errorf("counters went back: %+v then %+v", prev, c)
				return
			}
			prev = c
		}
	}()
	drive(t, p, pool, randomTraffic(20000, 1), true)
	close(stop)
	wg.Wait()
	if c := p.Counters(); c.PacketsIn != 20000 {
		t.Fatalf("PacketsIn %d after draining, want 20000 (Counters must be exact when idle)", c.PacketsIn)
	}
}

// TestNoAllocationsPerPacket checks the hot path in steady state for a
// spec of each kind.
func TestNoAllocationsPerPacket(t *testing.T) {
	for _, s := range append(mixedSpecs, "trace "+writeTrace(t, "1\n1\n2\n")) {
		p, pool := build(t, s, 1)
		now := emu.Time(0)
		step := func() {
			now += 50 * us
			if pkt := pool.Get(); pkt != nil {
				pkt.Data = pkt.Data[:1000]
				pkt.Data[0] = 0x45
				p.Enqueue(now, pkt)
			}
			for pkt := p.Dequeue(now); pkt != nil; pkt = p.Dequeue(now) {
				pool.Put(pkt)
			}
			p.NextDeadline()
		}
		for i := 0; i < 20000; i++ { // reach steady state
			step()
		}
		if n := testing.AllocsPerRun(5000, step); n != 0 {
			t.Errorf("%q: %v allocations per packet", s, n)
		}
	}
}

// TestTransparentAndPass: only a link that impairs nothing is transparent;
// Pass counts what a driver hands on over it, in and out, exactly once the
// driver asks NextDeadline (as it does before sleeping); Pass on any other
// link panics.
func TestTransparentAndPass(t *testing.T) {
	for in, want := range map[string]bool{
		"": true, "delay 0ms": true, "limit 50": true, "loss 0%": true,
		"delay 1us": false, "loss 0.001%": false, "rate 1gbit": false, "duplicate 1%": false, "onoff 1s 1ms": false,
	} {
		p, _ := build(t, in, 1)
		if got := p.Transparent(); got != want {
			t.Errorf("%q: Transparent() = %v, want %v", in, got, want)
		}
	}
	p, _ := build(t, "", 1)
	p.Pass(10, 14400)
	p.Pass(1, 60)
	p.NextDeadline()
	if c := p.Counters(); c.PacketsIn != 11 || c.PacketsOut != 11 || c.BytesIn != 14460 || c.BytesOut != 14460 || c.QueueDelaySumNs != 0 || p.Len() != 0 {
		t.Fatalf("counters after Pass: %+v, %d held", c, p.Len())
	}
	p, _ = build(t, "delay 1ms", 1)
	defer func() {
		if recover() == nil {
			t.Error("Pass on \"delay 1ms\" did not panic")
		}
	}()
	p.Pass(1, 100)
}

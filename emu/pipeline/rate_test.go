package pipeline

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

func deliveryTimes(got []delivery) []emu.Time {
	t := make([]emu.Time, len(got))
	for i, d := range got {
		t[i] = d.at
	}
	return t
}

func equalTimes(t *testing.T, what string, got, want []emu.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d deliveries %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: delivery %d at %d, want %d (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

func TestRateSerialization(t *testing.T) {
	// 1000 bytes at 8 Mbit/s take exactly 1 ms.
	p, pool := build(t, "rate 8mbit", 1)
	arr := []arrival{{0, 0, 1000}, {0, 1, 1000}, {0, 2, 1000}, {10 * ms, 3, 1000}, {10*ms + 500*us, 4, 500}}
	got := drive(t, p, pool, arr, true)
	equalTimes(t, "rate 8mbit", deliveryTimes(got), []emu.Time{1 * ms, 2 * ms, 3 * ms, 11 * ms, 11*ms + 500*us})
	c := p.Counters()
	// Queue delay is the time beyond the propagation delay: packet 1 waited
	// 1 ms and took 1 ms, packet 2 waited 2 ms and took 1 ms...
	if c.QueueDelayMaxNs != uint64(3*ms) || c.QueueDelaySumNs != uint64(1*ms+2*ms+3*ms+1*ms+1*ms) {
		t.Fatalf("queue delay max %d sum %d", c.QueueDelayMaxNs, c.QueueDelaySumNs)
	}
}

func TestRateCarriesSubNanosecondRemainders(t *testing.T) {
	// 1000 bytes at 3 Mbit/s take 2.666...ms: back to back, three packets
	// end at exactly 8 ms, not 3 x 2666666 ns.
	p, pool := build(t, "rate 3mbit", 1)
	got := drive(t, p, pool, every(3, 0, 0, 1000), true)
	equalTimes(t, "rate 3mbit", deliveryTimes(got), []emu.Time{2666666, 5333333, 8 * ms})
}

func TestRatePlusDelayIsNetemFormula(t *testing.T) {
	// netem: time_to_send = max(last, now + delay) + transmission time.
	p, pool := build(t, "delay 10ms rate 8mbit", 1)
	arr := []arrival{{0, 0, 1000}, {0, 1, 1000}, {500 * us, 2, 1000}, {20 * ms, 3, 1000}}
	got := drive(t, p, pool, arr, true)
	equalTimes(t, "delay+rate", deliveryTimes(got), []emu.Time{11 * ms, 12 * ms, 13 * ms, 31 * ms})
}

func TestRateOverheadAndCells(t *testing.T) {
	// 1000 + 20 bytes in 100-byte cells of 105 bytes: 11 cells = 1155 bytes
	// = 9240 bits at 8 Mbit/s = 1.155 ms.
	p, pool := build(t, "rate 8mbit 20 100 5", 1)
	got := drive(t, p, pool, every(1, 0, 0, 1000), true)
	equalTimes(t, "cells", deliveryTimes(got), []emu.Time{1155 * us})
	// A negative overhead strips bytes: 1000 - 14 = 986 bytes = 986 us.
	p, pool = build(t, "rate 8mbit -14", 1)
	got = drive(t, p, pool, every(1, 0, 0, 1000), true)
	equalTimes(t, "overhead", deliveryTimes(got), []emu.Time{986 * us})
}

func TestLimitOverflowDrops(t *testing.T) {
	// At time 0 the first packet starts transmitting and the next 10 wait:
	// limit counts waiting packets, so 14 of 25 are dropped.
	p, got := deliverN(t, "rate 8mbit limit 10", every(25, 0, 0, 1000), true, 11)
	for i, d := range got {
		if d.id != uint64(i) {
			t.Fatalf("delivery %d is packet %d: drop-tail must drop the newest", i, d.id)
		}
	}
	if c := p.Counters(); c.DropQueue != 14 || c.PacketsOut != 11 {
		t.Fatalf("DropQueue %d PacketsOut %d", c.DropQueue, c.PacketsOut)
	}
	checkInvariant(t, p)
}

func TestDefaultLimitIs1000(t *testing.T) {
	p, pool := build(t, "rate 1mbit", 1)
	got := drive(t, p, pool, every(1500, 0, 0, 100), false)
	if len(got) != 1001 || p.Counters().DropQueue != 499 {
		t.Fatalf("delivered %d dropped %d, want 1001 and 499", len(got), p.Counters().DropQueue)
	}
}

func TestByteLimit(t *testing.T) {
	p, pool := build(t, "rate 8mbit queue droptail bytes 5000", 1)
	arr := every(25, 0, 0, 1000)
	arr = append(arr, arrival{0, 99, 28}) // a small packet still fits? no: 5000 bytes are queued
	got := drive(t, p, pool, arr, true)
	if len(got) != 6 || p.Counters().DropQueue != 20 {
		t.Fatalf("delivered %d dropped %d, want 6 and 20", len(got), p.Counters().DropQueue)
	}
	// With a byte limit and no explicit limit there is no packet limit:
	// 2000 packets of 28 bytes fit in 64 kB.
	p, pool = build(t, "rate 1mbit queue droptail bytes 64kb", 1)
	got = drive(t, p, pool, every(2001, 0, 0, 28), false)
	if len(got) != 2001 {
		t.Fatalf("delivered %d, want 2001", len(got))
	}
}

// TestTxTimeIsExact compares the cached transmission time with exact
// big-integer arithmetic over random sizes, rates and remainders.
func TestTxTimeIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		rate := 1 + r.Uint64N(10_000_000_000_000)
		b := newRateBottleneck(spec.Link{Rate: rate}, 16, ring{})
		for j := 0; j < 5; j++ {
			size := 20 + r.IntN(1481)
			rem := r.Uint64N(rate)
			got, gotRem := b.txTime(size, rem)
			num := new(big.Int).Mul(big.NewInt(int64(size)), big.NewInt(8e9))
			num.Add(num, new(big.Int).SetUint64(rem))
			q, m := new(big.Int).QuoRem(num, new(big.Int).SetUint64(rate), new(big.Int))
			if uint64(got) != q.Uint64() || gotRem != m.Uint64() {
				t.Fatalf("txTime(%d, %d) at %d bit/s = %d r %d, want %v r %v", size, rem, rate, got, gotRem, q, m)
			}
		}
	}
}

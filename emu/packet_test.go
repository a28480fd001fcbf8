package emu

import (
	"sync"
	"testing"
)

func TestPoolGetPut(t *testing.T) {
	p := NewPool(3, 100)
	if p.Cap() != 3 || p.BufSize() != 100 || p.Available() != 3 {
		t.Fatalf("Cap %d BufSize %d Available %d", p.Cap(), p.BufSize(), p.Available())
	}
	var got []*Packet
	for i := 0; i < 3; i++ {
		pkt := p.Get()
		if pkt == nil {
			t.Fatalf("Get %d returned nil", i)
		}
		if len(pkt.Data) != 0 || cap(pkt.Data) != 100 {
			t.Fatalf("fresh packet: len %d cap %d", len(pkt.Data), cap(pkt.Data))
		}
		got = append(got, pkt)
	}
	if p.Get() != nil {
		t.Fatal("Get on an exhausted pool returned a packet")
	}
	if p.Available() != 0 {
		t.Fatalf("Available = %d, want 0", p.Available())
	}
	got[0].Data = append(got[0].Data, 1, 2, 3)
	p.Put(got[0])
	again := p.Get()
	if again != got[0] || len(again.Data) != 0 {
		t.Fatalf("recycled packet: %p len %d", again, len(again.Data))
	}
	p.Put(nil) // ignored
}

func TestPoolBuffersAreDisjoint(t *testing.T) {
	p := NewPool(2, 4)
	a, b := p.Get(), p.Get()
	a.Data = a.Data[:cap(a.Data)]
	b.Data = b.Data[:cap(b.Data)]
	for i := range a.Data {
		a.Data[i] = 0xaa
	}
	for i := range b.Data {
		b.Data[i] = 0xbb
	}
	// Appending past capacity must reallocate, never spill into b.
	a.Data = append(a.Data, 0xcc)
	for i, v := range b.Data {
		if v != 0xbb {
			t.Fatalf("b.Data[%d] = %#x after writes to a", i, v)
		}
	}
	// Put restores the pool's own buffer even after a reallocation.
	p.Put(a)
	c := p.Get()
	if cap(c.Data) != 4 {
		t.Fatalf("cap after Put of a reallocated packet: %d", cap(c.Data))
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

func TestPoolMisuse(t *testing.T) {
	p, q := NewPool(1, 8), NewPool(1, 8)
	pkt := p.Get()
	mustPanic(t, "Put into another pool", func() { q.Put(pkt) })
	p.Put(pkt)
	mustPanic(t, "double Put", func() { p.Put(pkt) })
	mustPanic(t, "NewPool(0, 1)", func() { NewPool(0, 1) })
	mustPanic(t, "NewPool(1, 0)", func() { NewPool(1, 0) })
}

func TestPoolConcurrent(t *testing.T) {
	p := NewPool(64, 16)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				if pkt := p.Get(); pkt != nil {
					pkt.Data = append(pkt.Data, byte(i))
					p.Put(pkt)
				}
			}
		}()
	}
	wg.Wait()
	if p.Available() != 64 {
		t.Fatalf("Available = %d after balanced Get/Put, want 64", p.Available())
	}
}

func TestPoolGetPutDoesNotAllocate(t *testing.T) {
	p := NewPool(4, 64)
	if n := testing.AllocsPerRun(1000, func() { p.Put(p.Get()) }); n != 0 {
		t.Fatalf("Get+Put allocates %v times", n)
	}
}

func TestCountersSub(t *testing.T) {
	a := Counters{PacketsIn: 10, BytesIn: 100, PacketsOut: 8, BytesOut: 80, DropLoss: 1, DropQueue: 1,
		DropCorrupt: 2, DropOff: 3, Duplicated: 4, Reordered: 5, QueueDelaySumNs: 600, QueueDelayMaxNs: 90, DropFlush: 7, LateOut: 9}
	b := Counters{PacketsIn: 4, BytesIn: 40, PacketsOut: 3, BytesOut: 30, DropLoss: 1, DropQueue: 0,
		DropCorrupt: 1, DropOff: 1, Duplicated: 1, Reordered: 2, QueueDelaySumNs: 100, QueueDelayMaxNs: 95, DropFlush: 2, LateOut: 4}
	want := Counters{PacketsIn: 6, BytesIn: 60, PacketsOut: 5, BytesOut: 50, DropLoss: 0, DropQueue: 1,
		DropCorrupt: 1, DropOff: 2, Duplicated: 3, Reordered: 3, QueueDelaySumNs: 500, QueueDelayMaxNs: 90, DropFlush: 5, LateOut: 5}
	if got := a.Sub(b); got != want {
		t.Fatalf("Sub = %+v\nwant %+v", got, want)
	}
	if m := (Counters{PacketsOut: 4, QueueDelaySumNs: 10}).MeanQueueDelayNs(); m != 2.5 {
		t.Fatalf("MeanQueueDelayNs = %v", m)
	}
	if m := (Counters{}).MeanQueueDelayNs(); m != 0 {
		t.Fatalf("MeanQueueDelayNs of zero = %v", m)
	}
}

func BenchmarkPoolGetPut(b *testing.B) {
	p := NewPool(1024, 2048)
	b.ReportAllocs()
	for b.Loop() {
		p.Put(p.Get())
	}
}

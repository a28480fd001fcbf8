package forward

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/tun"
	"github.com/quicbench/quicbench/tun/offload"
	"golang.org/x/sys/unix"
)

// tapRig is startRig with a packet tap on both paths.
func tapRig(t *testing.T, link string, vnet bool, to TapOptions) *rig {
	t.Helper()
	r := &rig{in: newPair(t, "in"), out: newPair(t, "out"), back: newPair(t, "back"), back2: newPair(t, "back2")}
	if vnet {
		r.in.dev = tun.FromFD(r.in.dev.Fd(), "in", true)
		r.out.dev = tun.FromFD(r.out.dev.Fd(), "out", true)
	}
	l, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	r.pool = emu.NewPool(4096, 2048)
	up, err := pipeline.New(l, 1, r.pool)
	if err != nil {
		t.Fatal(err)
	}
	downPool := emu.NewPool(64, 2048)
	down, _ := pipeline.New(spec.Link{}, 2, downPool)
	r.fwd, err = Start(emu.MonotonicClock(), Options{Tap: &to},
		Path{Name: "up", From: r.in.dev, To: r.out.dev, Link: up, Pool: r.pool},
		Path{Name: "down", From: r.back.dev, To: r.back2.dev, Link: down, Pool: downPool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.fwd.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// drainTap takes every record the tap holds; for each it checks the Seq
// order and returns the verdict counts of records with Seq in [from, to).
func drainTap(t *testing.T, tap *Tap, from, to uint64) (n map[pipeline.Verdict]uint64, marks map[pipeline.Marks]uint64, recs []Record) {
	t.Helper()
	n, marks = map[pipeline.Verdict]uint64{}, map[pipeline.Marks]uint64{}
	last := int64(-1)
	for r := tap.Peek(); r != nil; r = tap.Peek() {
		if int64(r.Seq) <= last {
			t.Fatalf("record Seq %d after %d", r.Seq, last)
		}
		last = int64(r.Seq)
		if r.Seq >= from && r.Seq < to {
			n[r.Verdict]++
			for m := pipeline.Marks(1); m != 0; m <<= 1 {
				if r.Marks&m != 0 {
					marks[m]++
				}
			}
			c := *r
			c.Data = append([]byte(nil), r.Data...)
			recs = append(recs, c)
		}
		tap.Release()
	}
	return n, marks, recs
}

// TestTapMatchesCountersBetweenMarks: the records between two marks of a
// lossy, duplicating, reordering link count exactly the difference of
// the marks' counters, and the records keep the packets' bytes up to the
// snap length.
func TestTapMatchesCountersBetweenMarks(t *testing.T) {
	r := tapRig(t, "delay 2ms 1ms loss 20% duplicate 10% reorder 10% corrupt 5%", false, TapOptions{Snap: 64})
	unix.SetsockoptTimeval(r.out.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 300_000})
	r.exchange(t, 0, 50, 1000) // before the first mark: not counted
	m1, err := r.fwd.Mark(0)
	if err != nil {
		t.Fatal(err)
	}
	got := r.exchange(t, 1000, 400, 1000)
	m2, err := r.fwd.Mark(0)
	if err != nil {
		t.Fatal(err)
	}
	c := m2.Counters.Sub(m1.Counters)
	if c.PacketsIn != 400 || c.DropLoss == 0 || c.Duplicated == 0 || c.Reordered == 0 || c.DropCorrupt == 0 {
		t.Fatalf("counters %+v: the link should have impaired some of 400 packets", c)
	}
	if uint64(len(got)) != c.PacketsOut {
		t.Fatalf("%d packets read, counters say %d delivered", len(got), c.PacketsOut)
	}
	n, marks, recs := drainTap(t, r.fwd.Tap(0), m1.Seq, m2.Seq)
	if m2.Cut != 0 {
		t.Fatalf("%d records cut", m2.Cut)
	}
	for _, ch := range []struct {
		what      string
		got, want uint64
	}{
		{"delivered", n[pipeline.Delivered], c.PacketsOut},
		{"lost", n[pipeline.DroppedLoss], c.DropLoss},
		{"duplicates", marks[pipeline.MarkDuplicate], c.Duplicated},
		{"reordered", marks[pipeline.MarkReordered], c.Reordered},
		{"corrupted", marks[pipeline.MarkCorrupted], c.DropCorrupt},
		{"records", uint64(len(recs)), m2.Seq - m1.Seq},
	} {
		if ch.got != ch.want {
			t.Errorf("%s: %d records, counters %d", ch.what, ch.got, ch.want)
		}
	}
	for _, rec := range recs {
		if rec.Len != 1200 || len(rec.Data) != 64 || rec.At < rec.In || rec.Kind != KindLink {
			t.Fatalf("record %+v", rec)
		}
		if i := binary.BigEndian.Uint32(rec.Data[28:]); i < 1000 || i >= 1400 {
			t.Fatalf("record of packet %d, outside the marks", i)
		}
		if rec.Verdict == pipeline.Delivered && rec.Marks&pipeline.MarkCorrupted == 0 {
			if want := packet(int(binary.BigEndian.Uint32(rec.Data[28:])), 1200)[:64]; !bytes.Equal(rec.Data, want) {
				t.Fatalf("record data differs from the packet")
			}
		}
	}
}

// TestTapFullRingCuts: a consumer that does not keep up loses records,
// counted in Cut and visible as gaps in Seq; the forwarder goes on.
func TestTapFullRingCuts(t *testing.T) {
	r := tapRig(t, "", false, TapOptions{Slots: 8})
	if got := r.exchange(t, 0, 100, 100); len(got) != 100 {
		t.Fatalf("%d of 100 packets through with a full tap", len(got))
	}
	m, err := r.fwd.Mark(0)
	if err != nil {
		t.Fatal(err)
	}
	tap := r.fwd.Tap(0)
	if m.Seq != 100 || m.Cut != 92 || tap.Cut() != 92 || tap.Slots() != 8 {
		t.Fatalf("mark %+v, cut %d; want 100 records, 92 cut", m, tap.Cut())
	}
	_, _, recs := drainTap(t, tap, 0, 100)
	if len(recs) != 8 || recs[7].Seq != 7 {
		t.Fatalf("%d records kept, want the first 8", len(recs))
	}
	// Room again: records continue with their Seq.
	r.exchange(t, 100, 5, 5)
	m2, _ := r.fwd.Mark(0)
	_, _, recs = drainTap(t, tap, m.Seq, m2.Seq)
	if len(recs) != 5 || recs[0].Seq != 100 {
		t.Fatalf("after draining: %d records from Seq %d", len(recs), recs[0].Seq)
	}
}

// TestTapCutsSuperPacketsOfTransparentLinks: a super-packet a transparent
// link passes on whole is recorded as its wire packets.
func TestTapCutsSuperPacketsOfTransparentLinks(t *testing.T) {
	const payload, mss = 14000, 1400
	hdr, super := tsoPacket(payload, mss)
	in := make([]byte, offload.VirtioNetHdrLen+len(super))
	if err := hdr.Encode(in); err != nil {
		t.Fatal(err)
	}
	copy(in[offload.VirtioNetHdrLen:], super)
	r := tapRig(t, "", true, TapOptions{Snap: 100})
	if err := write(r.in.peer, in); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<17)
	if n, err := read(r.out.peer, buf); err != nil || !bytes.Equal(buf[:n], in) {
		t.Fatalf("super-packet not passed on whole: %d bytes, %v", n, err)
	}
	m, err := r.fwd.Mark(0)
	if err != nil {
		t.Fatal(err)
	}
	n, _, recs := drainTap(t, r.fwd.Tap(0), 0, m.Seq)
	if len(recs) != 10 || n[pipeline.Delivered] != 10 || m.Counters.PacketsOut != 10 {
		t.Fatalf("%d records (%d delivered) for 10 wire packets; counters %+v", len(recs), n[pipeline.Delivered], m.Counters)
	}
	for i, rec := range recs {
		if seq := binary.BigEndian.Uint32(rec.Data[24:]); seq != uint32(1000+i*mss) || rec.Len != 40+mss || len(rec.Data) != 100 {
			t.Fatalf("record %d: sequence %d, length %d, %d bytes kept", i, seq, rec.Len, len(rec.Data))
		}
	}
}

// TestMarkWithoutTap: Mark gives exact counters without a tap too, and
// fails once the forwarder is closed.
func TestMarkWithoutTap(t *testing.T) {
	r := newRig(t, "loss 50%")
	unix.SetsockoptTimeval(r.out.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000})
	r.exchange(t, 0, 200, 200)
	m, err := r.fwd.Mark(0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Counters.PacketsIn != 200 || m.Counters.DropLoss+m.Counters.PacketsOut != 200 || m.Seq != 0 || r.fwd.Tap(0) != nil {
		t.Fatalf("mark %+v", m)
	}
	r.fwd.Close()
	if _, err := r.fwd.Mark(0); err == nil {
		t.Fatal("Mark after Close succeeded")
	}
	if _, err := r.fwd.Mark(3); err == nil {
		t.Fatal("Mark of a missing path succeeded")
	}
}

// TestTapNoAllocationPerPacket: with the tap on, the forwarder still
// allocates nothing per packet (the test drains the tap as it goes).
func TestTapNoAllocationPerPacket(t *testing.T) {
	r := tapRig(t, "delay 1us", false, TapOptions{Snap: 2048})
	tap := r.fwd.Tap(0)
	const batches, per = 200, 50
	pkts := make([][]byte, per)
	for i := range pkts {
		pkts[i] = packet(i, 1200)
	}
	buf := make([]byte, 4096)
	unix.SetsockoptTimeval(r.out.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50_000})
	records := 0
	run := func() {
		for b := 0; b < batches; b++ {
			for _, p := range pkts {
				write(r.in.peer, p)
			}
			for range pkts {
				if _, err := read(r.out.peer, buf); err != nil {
					break // lost
				}
			}
			for rec := tap.Peek(); rec != nil; rec = tap.Peek() {
				records++
				tap.Release()
			}
		}
	}
	run()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	run()
	runtime.ReadMemStats(&m1)
	// a read that timed out (a busy machine) leaves its batch's last
	// records to come: drain them before counting
	for deadline := time.Now().Add(10 * time.Second); records < 2*batches*per && time.Now().Before(deadline); {
		if rec := tap.Peek(); rec != nil {
			records++
			tap.Release()
			continue
		}
		time.Sleep(time.Millisecond)
	}
	if records != 2*batches*per || tap.Cut() != 0 {
		t.Fatalf("%d records, %d cut, for %d packets", records, tap.Cut(), 2*batches*per)
	}
	allocs := m1.Mallocs - m0.Mallocs
	if perPacket := float64(allocs) / (batches * per); perPacket > 0.01 {
		t.Fatalf("%d allocations for %d packets (%.3f per packet)", allocs, batches*per, perPacket)
	}
}

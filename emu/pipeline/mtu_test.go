package pipeline

import (
	"slices"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

// TestMTUDropsOversize checks that packets above the MTU are dropped and
// counted, that packets at the MTU pass, and that the byte counters see
// the offered packets.
func TestMTUDropsOversize(t *testing.T) {
	for _, s := range []string{"mtu 1280", "mtu 1280 blackhole", "mtu 1280 delay 10ms rate 10mbit"} {
		p, pool := build(t, s, 1)
		var arr []arrival
		sizes := []int{1279, 1280, 1281, 1500, 60, 1300}
		for i, n := range sizes {
			arr = append(arr, arrival{at: ms * emu.Time(i), id: uint64(i), size: n})
		}
		got := drive(t, p, pool, arr, false)
		var ids []uint64
		for _, d := range got {
			ids = append(ids, d.id)
		}
		if want := []uint64{0, 1, 4}; !slices.Equal(ids, want) {
			t.Errorf("%q: delivered %v, want %v", s, ids, want)
		}
		p.publish()
		c := p.Counters()
		if c.DropMTU != 3 || c.PacketsIn != 6 || c.PacketsOut != 3 || c.BytesIn != 1279+1280+1281+1500+60+1300 {
			t.Errorf("%q: counters %+v", s, c)
		}
		checkInvariant(t, p)
		if pool.Available() != pool.Cap() {
			t.Errorf("%q: %d packets not returned to the pool", s, pool.Cap()-pool.Available())
		}
	}
}

// TestMTUAccessors checks what the driver is told about the MTU.
func TestMTUAccessors(t *testing.T) {
	for _, tt := range []struct {
		spec string
		mtu  int
		mode spec.MTUMode
	}{{"delay 1ms", 0, spec.MTUICMP}, {"mtu 576", 576, spec.MTUICMP}, {"mtu 1400 blackhole", 1400, spec.MTUBlackhole}} {
		p, _ := build(t, tt.spec, 1)
		if mtu, mode := p.MTU(); mtu != tt.mtu || mode != tt.mode {
			t.Errorf("%q: MTU() = %d, %v; want %d, %v", tt.spec, mtu, mode, tt.mtu, tt.mode)
		}
		if p.TooBig(tt.mtu) || (tt.mtu > 0) != p.TooBig(tt.mtu+1) || p.TooBig(1500) != (tt.mtu > 0) {
			t.Errorf("%q: TooBig wrong around %d", tt.spec, tt.mtu)
		}
		if p.Transparent() != (tt.mtu == 0 && tt.spec == "") {
			t.Errorf("%q: Transparent() = %v", tt.spec, p.Transparent())
		}
	}
	if p, _ := build(t, "mtu 1500", 1); p.Transparent() {
		t.Error("a link with an MTU is transparent: the forwarder would pass super-packets unchecked")
	}
}

// TestMTUDrawsNothing checks that an oversize packet draws no random
// decision: the packets that fit get the same fates, in the same order, as
// over the same link without an MTU fed only those packets.
func TestMTUDrawsNothing(t *testing.T) {
	const link = "delay 10ms 3ms loss 20% duplicate 5% reorder 10% corrupt 2%"
	var all, small []arrival
	for i := range 2000 {
		size := 200 + (i*389)%1300 // 200..1499
		a := arrival{at: ms * emu.Time(i), id: uint64(i), size: size}
		all = append(all, a)
		if size <= 1000 {
			small = append(small, a)
		}
	}
	pm, poolM := build(t, link+" mtu 1000", 7)
	withMTU := drive(t, pm, poolM, all, false)
	pn, poolN := build(t, link, 7)
	without := drive(t, pn, poolN, small, false)
	if len(withMTU) != len(without) || len(withMTU) == 0 {
		t.Fatalf("delivered %d with the MTU, %d without", len(withMTU), len(without))
	}
	for i := range withMTU {
		a, b := withMTU[i], without[i]
		if a.at != b.at || a.id != b.id || !slices.Equal(a.data, b.data) {
			t.Fatalf("delivery %d differs: id %d at %d vs id %d at %d", i, a.id, a.at, b.id, b.at)
		}
	}
	pm.publish()
	if c := pm.Counters(); c.DropMTU != uint64(len(all)-len(small)) {
		t.Errorf("DropMTU = %d, want %d", c.DropMTU, len(all)-len(small))
	}
	checkInvariant(t, pm)
}

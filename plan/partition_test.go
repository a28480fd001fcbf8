package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		err  string
	}{
		{"1/4", Shard{1, 4}, ""},
		{" 4/4 ", Shard{4, 4}, ""},
		{"1/1", Shard{1, 1}, ""},
		{"4096/4096", Shard{4096, 4096}, ""},
		{"0/4", Shard{}, "K from 1 to 4"},
		{"5/4", Shard{}, "K from 1 to 4"},
		{"1/0", Shard{}, "N from 1 to 4096"},
		{"0/0", Shard{}, "K from 1 to N"},
		{"1/4097", Shard{}, "N from 1 to 4096"},
		{"-1/4", Shard{}, "K from 1"},
		{"abc", Shard{}, "want K/N"},
		{"a/b", Shard{}, "whole numbers"},
		{"1/2/3", Shard{}, "want K/N"},
		{"", Shard{}, "want K/N"},
	} {
		got, err := ParseShard(c.in)
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("ParseShard(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseShard(%q) error %v; want one containing %q", c.in, err, c.err)
		}
	}
}

func TestPartition(t *testing.T) {
	s := time.Second
	// LPT: 7 -> 0, 5 -> 1, 4 -> 2, 3 -> 2 (least: 4 vs 5 vs 7), 3 -> 1 (5 vs 7 vs 7) ...
	got := Partition([]time.Duration{3 * s, 7 * s, 4 * s, 5 * s, 3 * s}, 3)
	want := []int{2, 0, 2, 1, 1}
	if !slices.Equal(got, want) {
		t.Errorf("Partition = %v, want %v", got, want)
	}
	// Equal durations: round robin in the given order, lowest index first.
	if got := Partition([]time.Duration{s, s, s, s, s}, 2); !slices.Equal(got, []int{0, 1, 0, 1, 0}) {
		t.Errorf("equal durations: %v", got)
	}
	// More shards than blocks: the first shards get one each.
	if got := Partition([]time.Duration{s, 2 * s}, 4); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("more shards than blocks: %v", got)
	}
	if got := Partition(nil, 3); len(got) != 0 {
		t.Errorf("no blocks: %v", got)
	}
	// Deterministic.
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration((i*7919)%97+1) * time.Millisecond
	}
	a, b := Partition(d, 16), Partition(slices.Clone(d), 16)
	if !slices.Equal(a, b) {
		t.Error("Partition is not deterministic")
	}
}

func TestBlocksMatchBlockRuns(t *testing.T) {
	for _, name := range BuiltinNames() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := p.Blocks()
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		for _, b := range blocks {
			total += b.Duration
		}
		if total != e.Total {
			t.Errorf("%s: blocks add up to %v, the estimate is %v", name, total, e.Total)
		}
		sample := make([]time.Duration, len(e.Cells))
		loads := make([]SampleLoad, len(e.Cells))
		for i, c := range e.Cells {
			sample[i] = c.Sample
		}
		if _, n := p.blockRuns(sample, loads); n != len(blocks) {
			t.Errorf("%s: %d blocks, the parallel estimate counts %d", name, len(blocks), n)
		}
	}
}

// TestShardBalance checks the target: the longest shard's estimate
// is within 15% of the mean for every built-in plan (and its quick
// variant) at 4, 16 and 64 shards, unless one block alone is longer than
// that (then the bound is the longest block over the mean).
func TestShardBalance(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %7s %7s %7s   (longest shard / mean; * = one block is longer than 1.15 x mean)\n", "plan", "N=4", "N=16", "N=64")
	for _, name := range BuiltinNames() {
		base, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		quick, err := base.Quick()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			label string
			p     *Plan
		}{{name, base}, {name + " --quick", quick}} {
			fmt.Fprintf(&table, "%-28s", v.label)
			for _, n := range []int{4, 16, 64} {
				s, err := v.p.Shards(n)
				if err != nil {
					t.Fatal(err)
				}
				imb, block := s.Imbalance()
				mark := " "
				if block > 1.15 {
					mark = "*"
					t.Logf("%s at N=%d: one block is %.2f x the mean shard (%d blocks); imbalance %.3f", v.label, n, block, len(s.Blocks), imb)
				}
				fmt.Fprintf(&table, " %6.3f%s", imb, mark)
				if bound := math.Max(1.15, block); imb > bound+1e-9 {
					t.Errorf("%s at N=%d: imbalance %.3f above %.3f", v.label, n, imb, bound)
				}
				seen := 0
				for k := 1; k <= n; k++ {
					seen += len(s.Member(k))
				}
				if seen != len(s.Blocks) {
					t.Errorf("%s at N=%d: the shards hold %d blocks of %d", v.label, n, seen, len(s.Blocks))
				}
			}
			table.WriteString("\n")
		}
	}
	t.Log("\n" + table.String())
}

func TestShardsDeterministic(t *testing.T) {
	p, err := Builtin("degraded-networks")
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Shards(16)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Builtin("degraded-networks")
	if err != nil {
		t.Fatal(err)
	}
	q.Seed = 12345 // the seed does not move blocks
	b, err := q.Shards(16)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Of, b.Of) {
		t.Error("the same plan cut twice gives different shards")
	}
	if _, err := p.Shards(0); err == nil {
		t.Error("Shards(0) accepted")
	}
}

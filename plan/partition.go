package plan

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxShards is the most shards a run may be cut into (quicbench run
// --shard K/N).
const MaxShards = 4096

// Shard names one part of a run cut into N: K in 1..N. The zero Shard is
// a whole run.
type Shard struct{ K, N int }

// IsZero reports whether s is the whole run (no --shard).
func (s Shard) IsZero() bool { return s.N == 0 }

// String is "K/N" ("" for the whole run).
func (s Shard) String() string {
	if s.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.K, s.N)
}

// Check reports whether s is a whole run or a valid shard (1 <= K <= N <=
// MaxShards).
func (s Shard) Check() error {
	if s == (Shard{}) {
		return nil
	}
	if s.N < 1 || s.N > MaxShards {
		return fmt.Errorf("shard %d/%d: want N from 1 to %d shards", s.K, s.N, MaxShards)
	}
	if s.K < 1 || s.K > s.N {
		return fmt.Errorf("shard %d/%d: want K from 1 to %d (K is 1-based)", s.K, s.N, s.N)
	}
	return nil
}

// ParseShard parses "K/N" (quicbench run --shard): shard K (1-based) of N.
func ParseShard(v string) (Shard, error) {
	ks, ns, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok || strings.Contains(ns, "/") {
		return Shard{}, fmt.Errorf("shard %q: want K/N, e.g. 1/4", v)
	}
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if err := errors.Join(err1, err2); err != nil {
		return Shard{}, fmt.Errorf("shard %q: want K/N with whole numbers, e.g. 1/4", v)
	}
	s := Shard{K: k, N: n}
	if s == (Shard{}) {
		return s, fmt.Errorf("shard %q: want K from 1 to N", v)
	}
	return s, s.Check()
}

// Partition assigns blocks of the given estimated durations to n shards
// (0..n-1) so that the shards' estimated totals are balanced: greedy
// longest processing time first. The blocks are taken by duration,
// longest first (equal durations in their given order), and each goes to
// the shard with the least estimated total so far (ties: the lowest
// index). The result depends only on durations and n. n < 1 counts as 1.
func Partition(durations []time.Duration, n int) []int {
	n = max(n, 1)
	out := make([]int, len(durations))
	order := make([]int, len(durations))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case durations[a] > durations[b]:
			return -1
		case durations[a] < durations[b]:
			return 1
		}
		return 0
	})
	h := sliceHeap[shardLoad]{items: make([]shardLoad, n), less: func(a, b shardLoad) bool {
		if a.load != b.load {
			return a.load < b.load
		}
		return a.shard < b.shard
	}}
	for i := range h.items {
		h.items[i] = shardLoad{shard: i}
	}
	// Already a heap: equal loads, ascending index.
	for _, b := range order {
		out[b] = h.items[0].shard
		h.items[0].load = addSat(h.items[0].load, max(durations[b], 0))
		heap.Fix(&h, 0)
	}
	return out
}

// shardLoad is a shard's estimated total so far.
type shardLoad struct {
	load  time.Duration
	shard int
}

// BlockKey identifies a block of a run: all protocols of one iteration (-1:
// the warm-up) of one cell group, which always run together on one
// testbed and in one shard.
type BlockKey struct {
	Group     string
	Iteration int
}

// PlanBlock is one block of the plan with its estimated duration (the sum
// of its samples' EstimateCell).
type PlanBlock struct {
	BlockKey
	Duration time.Duration
}

// maxShardBlocks is the most blocks a plan cut into shards may have
// (Blocks lists each one).
const maxShardBlocks = 1 << 22

// Blocks returns the plan's blocks in the runner's schedule order (groups
// in order of first appearance; in each, the warm-up when any cell has one,
// then iterations 0 up to the largest Iterations; a cell takes part in the
// warm-up when it has one and in iteration i when i < its Iterations),
// with their estimates.
func (p *Plan) Blocks() ([]PlanBlock, error) {
	if p == nil || p.cells == nil {
		return nil, fmt.Errorf("plan: Blocks on a plan that was not parsed")
	}
	sample := make([]time.Duration, len(p.cells))
	for i := range p.cells {
		d, err := p.EstimateCell(&p.cells[i])
		if err != nil {
			return nil, err
		}
		sample[i] = d
	}
	var order []string
	members := map[string][]int{}
	for i := range p.cells {
		g := p.cells[i].Group
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	var out []PlanBlock
	for _, g := range order {
		first, last := 0, 0
		for _, i := range members[g] {
			if p.cells[i].Warmup {
				first = -1
			}
			last = max(last, p.cells[i].Iterations)
		}
		if len(out)+last-first > maxShardBlocks {
			return nil, fmt.Errorf("plan: more than %d blocks: too many to cut into shards", maxShardBlocks)
		}
		for it := first; it < last; it++ {
			b := PlanBlock{BlockKey: BlockKey{Group: g, Iteration: it}}
			any := false
			for _, i := range members[g] {
				c := &p.cells[i]
				if (it < 0 && !c.Warmup) || it >= c.Iterations {
					continue
				}
				any = true
				b.Duration = addSat(b.Duration, sample[i])
			}
			if any {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// Sharding is the plan's blocks cut into N shards (Plan.Shards).
type Sharding struct {
	N      int
	Blocks []PlanBlock // in schedule order
	Of     []int       // the shard (1..N) of each block
	Totals []time.Duration
}

// Shards cuts the plan's blocks into n shards with Partition over their
// estimates. Every block is in exactly one shard; a block's shard depends
// only on the plan and n (not on the seed, the machine or the order the
// shards run in).
func (p *Plan) Shards(n int) (*Sharding, error) {
	if err := (Shard{K: 1, N: n}).Check(); err != nil {
		return nil, err
	}
	blocks, err := p.Blocks()
	if err != nil {
		return nil, err
	}
	d := make([]time.Duration, len(blocks))
	for i, b := range blocks {
		d[i] = b.Duration
	}
	part := Partition(d, n)
	s := &Sharding{N: n, Blocks: blocks, Of: make([]int, len(blocks)), Totals: make([]time.Duration, n)}
	for i, k := range part {
		s.Of[i] = k + 1
		s.Totals[k] = addSat(s.Totals[k], d[i])
	}
	return s, nil
}

// Member returns the set of blocks in shard k.
func (s *Sharding) Member(k int) map[BlockKey]bool {
	out := map[BlockKey]bool{}
	for i, b := range s.Blocks {
		if s.Of[i] == k {
			out[b.BlockKey] = true
		}
	}
	return out
}

// Imbalance is the longest shard's estimate over the mean shard's (1 is
// perfect balance), and the longest block's over the mean: a bound the
// imbalance cannot beat.
func (s *Sharding) Imbalance() (imbalance, longestBlock float64) {
	var total, most, block time.Duration
	for _, t := range s.Totals {
		total = addSat(total, t)
		most = max(most, t)
	}
	for _, b := range s.Blocks {
		block = max(block, b.Duration)
	}
	if total == 0 {
		return 1, 0
	}
	mean := float64(total) / float64(s.N)
	return float64(most) / mean, float64(block) / mean
}

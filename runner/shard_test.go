package runner

import (
	"testing"
	"time"

	"github.com/quicbench/quicbench/plan"
)

// TestShardSteps: the N shards of a plan's schedule take every step
// exactly once, whole blocks each, with the order and seeds of the whole
// run; and plan.Plan.Blocks lists the blocks the runner cuts (blocksOf).
func TestShardSteps(t *testing.T) {
	for _, name := range []string{"quick", "degraded-networks", "three-sites"} {
		p, err := plan.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		cells, err := p.Expand()
		if err != nil {
			t.Fatal(err)
		}
		for i := range cells {
			cells[i].ID = int64(i + 1)
		}
		steps := Schedule(cells, p.Seed)
		blocks := blocksOf(steps, map[string]time.Duration{})
		pb, err := p.Blocks()
		if err != nil {
			t.Fatal(err)
		}
		if len(pb) != len(blocks) {
			t.Fatalf("%s: plan.Blocks has %d blocks, the schedule %d", name, len(pb), len(blocks))
		}
		for i, b := range blocks {
			if pb[i].Group != b.group || pb[i].Iteration != b.steps[0].Iteration {
				t.Fatalf("%s: block %d is %v in the plan, %s/%d in the schedule", name, i, pb[i].BlockKey, b.group, b.steps[0].Iteration)
			}
		}
		for _, n := range []int{1, 4, 7} {
			type id struct {
				cell int64
				it   int
			}
			seen := map[id]Step{}
			blockShard := map[plan.BlockKey]int{}
			for k := 1; k <= n; k++ {
				got, err := shardSteps(p, steps, plan.Shard{K: k, N: n})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range got {
					if _, dup := seen[id{s.Cell.ID, s.Iteration}]; dup {
						t.Fatalf("%s N=%d: step %s/%d in two shards", name, n, s.Cell.Key, s.Iteration)
					}
					seen[id{s.Cell.ID, s.Iteration}] = s
					bk := plan.BlockKey{Group: s.Cell.Group, Iteration: s.Iteration}
					if o, ok := blockShard[bk]; ok && o != k {
						t.Fatalf("%s N=%d: block %v split over shards %d and %d", name, n, bk, o, k)
					}
					blockShard[bk] = k
				}
			}
			if len(seen) != len(steps) {
				t.Fatalf("%s N=%d: the shards take %d steps of %d", name, n, len(seen), len(steps))
			}
			for _, s := range steps {
				if got := seen[id{s.Cell.ID, s.Iteration}]; got != s {
					t.Fatalf("%s N=%d: step %+v taken as %+v", name, n, s, got)
				}
			}
		}
	}
}

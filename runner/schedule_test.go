package runner

import (
	"testing"

	"github.com/quicbench/quicbench/model"
)

func cellsForTest() []model.Cell {
	var cells []model.Cell
	for _, g := range []string{"a/ttfb", "a/download"} {
		for _, p := range []string{"h1", "h2", "h3"} {
			cells = append(cells, model.Cell{Key: g + "/" + p, Group: g, Protocol: p, Iterations: 20, Warmup: true})
		}
	}
	return cells
}

func TestScheduleCountsAndPairing(t *testing.T) {
	cells := cellsForTest()
	steps := Schedule(cells, 42)
	// 2 groups x 3 protocols x (20 + 1 warm-up)
	if len(steps) != 2*3*21 {
		t.Fatalf("got %d steps, want %d", len(steps), 2*3*21)
	}
	seen := map[string]bool{}
	for _, s := range steps {
		k := s.Cell.Key + "#" + string(rune('A'+s.Iteration+1))
		if seen[k] {
			t.Fatalf("duplicate step %s", k)
		}
		seen[k] = true
	}
	// Within one (group, iteration), every protocol has the same seed and
	// seeds differ between iterations.
	type gi struct {
		g  string
		it int
	}
	seeds := map[gi]uint64{}
	for _, s := range steps {
		k := gi{s.Cell.Group, s.Iteration}
		if prev, ok := seeds[k]; ok && prev != s.Seed {
			t.Fatalf("group %s iteration %d has two seeds", k.g, k.it)
		}
		seeds[k] = s.Seed
	}
	if seeds[gi{"a/ttfb", 0}] == seeds[gi{"a/ttfb", 1}] {
		t.Fatal("different iterations share a seed")
	}
}

func TestScheduleInterleavesAndIsDeterministic(t *testing.T) {
	a := Schedule(cellsForTest(), 7)
	b := Schedule(cellsForTest(), 7)
	for i := range a {
		if a[i].Cell.Key != b[i].Cell.Key || a[i].Seed != b[i].Seed {
			t.Fatalf("step %d differs between identical schedules", i)
		}
	}
	// Protocol order must vary across iterations (with 21 iterations of 3
	// protocols, a fixed order would be a bug); and each iteration runs every
	// protocol once before the next iteration starts.
	firsts := map[string]int{}
	for i := 0; i < len(a); i += 3 {
		if a[i].Iteration != a[i+2].Iteration {
			t.Fatalf("iteration %d not contiguous", a[i].Iteration)
		}
		firsts[a[i].Cell.Protocol]++
	}
	if len(firsts) < 2 {
		t.Fatalf("the same protocol always went first: %v", firsts)
	}
	c := Schedule(cellsForTest(), 8)
	same := true
	for i := range a {
		if a[i].Cell.Key != c[i].Cell.Key {
			same = false
		}
	}
	if same {
		t.Fatal("a different run seed gave the same order")
	}
}

func TestScheduleWarmupFirst(t *testing.T) {
	steps := Schedule(cellsForTest()[:3], 1)
	for i := 0; i < 3; i++ {
		if !steps[i].Warmup() {
			t.Fatalf("step %d is not the warm-up", i)
		}
	}
	if steps[3].Warmup() {
		t.Fatal("more than one warm-up iteration")
	}
}

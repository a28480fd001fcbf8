package runner

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"github.com/quicbench/quicbench/model"
)

// Step is one sample to take: a cell and an iteration (-1 for warm-up), and
// the position of its protocol within the iteration's shuffled order.
type Step struct {
	Cell      *model.Cell
	Iteration int
	Order     int
	Seed      uint64 // emulator seed, equal for all protocols of one iteration of one group
}

// Warmup reports whether the step is the uncounted warm-up sample.
func (s Step) Warmup() bool { return s.Iteration < 0 }

// IterationSeed derives the emulator seed of one iteration of one cell group
// from the run seed. Every protocol of the iteration gets this seed, so that
// paired samples meet the same loss, jitter and reorder decisions.
func IterationSeed(runSeed uint64, group string, iteration int) uint64 {
	h := sha256.New()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], runSeed)
	binary.LittleEndian.PutUint64(b[8:], uint64(int64(iteration)))
	h.Write(b[:])
	h.Write([]byte(group))
	sum := h.Sum(nil)
	return binary.LittleEndian.Uint64(sum[:8])
}

// Schedule expands cells into the ordered list of samples to take. Cells are
// grouped by Group in order of first appearance; within a group, iterations
// run in order (warm-up first when any cell asks for it) and, within each
// iteration, the group's protocols run in an order shuffled from the run seed
// (never all of one protocol before the other).
func Schedule(cells []model.Cell, runSeed uint64) []Step {
	var groups []string
	byGroup := map[string][]*model.Cell{}
	for i := range cells {
		c := &cells[i]
		if _, ok := byGroup[c.Group]; !ok {
			groups = append(groups, c.Group)
		}
		byGroup[c.Group] = append(byGroup[c.Group], c)
	}
	var steps []Step
	for _, g := range groups {
		members := byGroup[g]
		maxIter, warm := 0, false
		for _, c := range members {
			maxIter = max(maxIter, c.Iterations)
			warm = warm || c.Warmup
		}
		first := 0
		if warm {
			first = -1
		}
		for it := first; it < maxIter; it++ {
			seed := IterationSeed(runSeed, g, it)
			rng := rand.New(rand.NewPCG(seed, runSeed))
			perm := rng.Perm(len(members))
			order := 0
			for _, idx := range perm {
				c := members[idx]
				if (it < 0 && !c.Warmup) || it >= c.Iterations {
					continue
				}
				steps = append(steps, Step{Cell: c, Iteration: it, Order: order, Seed: seed})
				order++
			}
		}
	}
	return steps
}

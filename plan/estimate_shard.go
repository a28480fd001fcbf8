package plan

import (
	"math"
	"time"
)

// EstimateShard is EstimateWith for shard sh of the plan (quicbench run
// --shard K/N): Total is the estimate of the shard's samples one at a
// time, Cells holds every cell with the samples the shard takes of it,
// and Parallel the replay of the shard's blocks on up to n testbeds (n <=
// 1: Total). A shard's blocks are the ones Shards puts in it, so its
// estimate is a whole run's with only those blocks.
func (p *Plan) EstimateShard(n int, sh Shard) (Estimate, error) {
	if sh.IsZero() {
		return p.EstimateWith(n)
	}
	if err := sh.Check(); err != nil {
		return Estimate{}, err
	}
	e, err := p.Estimate()
	if err != nil {
		return Estimate{}, err
	}
	s, err := p.Shards(sh.N)
	if err != nil {
		return Estimate{}, err
	}
	member := s.Member(sh.K)
	loads := make([]SampleLoad, len(p.cells))
	for i := range p.cells {
		if loads[i], err = CellLoad(&p.cells[i]); err != nil {
			return Estimate{}, err
		}
	}
	groups := map[string]int{}    // group -> its number
	members := map[string][]int{} // group -> its cells
	for i := range p.cells {
		g := p.cells[i].Group
		if _, ok := groups[g]; !ok {
			groups[g] = len(groups)
		}
		members[g] = append(members[g], i)
	}
	samples := make([]int, len(p.cells))
	var blocks []pblock
	var total time.Duration
	for _, b := range s.Blocks {
		if !member[b.BlockKey] {
			continue
		}
		pb := pblock{group: groups[b.Group]}
		for _, i := range members[b.Group] {
			c := &p.cells[i]
			if c.Group != b.Group || (b.Iteration < 0 && !c.Warmup) || b.Iteration >= c.Iterations {
				continue
			}
			d := e.Cells[i].Sample
			samples[i]++
			pb.dur = addSat(pb.dur, d)
			pb.load.CPU = math.Max(pb.load.CPU, loads[i].CPU)
			if loads[i].Exclusive && !pb.load.Exclusive {
				pb.load.Exclusive, pb.load.Reason = true, loads[i].Reason
			}
			pb.load.Browser = pb.load.Browser || loads[i].Browser
		}
		total = addSat(total, pb.dur)
		blocks = append(blocks, pb)
	}
	out := Estimate{Total: total, Parallel: total, ParallelN: 1}
	for i, c := range e.Cells {
		c.Samples = samples[i]
		out.Cells = append(out.Cells, c)
	}
	if n > 1 {
		adm := RefAdmission(n, p.cells)
		out.Parallel, out.ParallelN = simulateParallel(blocks, adm, p.Precision() > 0, nil), adm.Slots
	}
	return out, nil
}

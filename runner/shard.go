package runner

import (
	"fmt"

	"github.com/quicbench/quicbench/plan"
)

// shardSteps keeps the steps of a schedule whose block (group and
// iteration) plan.Plan.Shards puts in shard sh. The steps keep their
// order, position and seed: those of the whole run.
func shardSteps(p *plan.Plan, steps []Step, sh plan.Shard) ([]Step, error) {
	s, err := p.Shards(sh.N)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", sh, err)
	}
	in := s.Member(sh.K)
	out := steps[:0:0]
	for _, st := range steps {
		if in[plan.BlockKey{Group: st.Cell.Group, Iteration: st.Iteration}] {
			out = append(out, st)
		}
	}
	return out, nil
}

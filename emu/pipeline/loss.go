package pipeline

import "github.com/quicbench/quicbench/emu/spec"

// lossStage decides which packets the loss model drops. It draws a fixed
// number of values per packet (1 for random and state, 2 for gemodel).
type lossStage struct {
	model spec.LossModel
	s     stream

	random chain // LossRandom

	// LossGemodel: probabilities of good->bad, bad->good, loss in bad, loss
	// in good.
	bad                     bool
	toBad, toGood           prob
	lossInBad, lossInGood   prob
	state                   uint8 // LossState: 1..4 as in netem
	p13, p31, p32, p23, p14 prob
}

func newLossStage(l spec.Loss, seed uint64) lossStage {
	st := lossStage{model: l.Model, s: newStream(seed, stageLoss), state: 1}
	switch l.Model {
	case spec.LossRandom:
		st.random = newChain(l.Percent, l.Correlation)
	case spec.LossGemodel:
		st.toBad, st.toGood = newProb(l.P), newProb(l.R)
		st.lossInBad, st.lossInGood = newProb(l.BadLoss), newProb(l.GoodLoss)
	case spec.LossState:
		st.p13, st.p31, st.p32 = newProb(l.P13), newProb(l.P31), newProb(l.P32)
		st.p23, st.p14 = newProb(l.P23), newProb(l.P14)
	}
	return st
}

// lost draws the next packet's fate.
func (st *lossStage) lost() bool {
	switch st.model {
	case spec.LossRandom:
		return st.random.step(st.s.u64())
	case spec.LossGemodel:
		// The loss probability is the current state's; the transition
		// happens after it, as in netem's loss_gilb_ell.
		x, y := st.s.u64(), st.s.u64()
		if st.bad {
			lost := st.lossInBad.hit(x)
			if st.toGood.hit(y) {
				st.bad = false
			}
			return lost
		}
		lost := st.lossInGood.hit(x)
		if st.toBad.hit(y) {
			st.bad = true
		}
		return lost
	case spec.LossState:
		return st.step4(prob(st.s.u64() >> 11))
	}
	return false
}

// step4 is netem's 4-state model (loss_4state): 1 = transmitted in a gap
// period, 2 = transmitted in a burst, 3 = lost in a burst, 4 = isolated
// loss. A packet is lost when the chain moves into state 3 or 4.
func (st *lossStage) step4(r prob) bool {
	switch st.state {
	case 1:
		switch {
		case r < st.p14:
			st.state = 4
			return true
		case r < st.p13+st.p14:
			st.state = 3
			return true
		}
	case 2:
		if r < st.p23 {
			st.state = 3
			return true
		}
	case 3:
		switch {
		case r < st.p32:
			st.state = 2
		case r < st.p31+st.p32:
			st.state = 1
		default:
			return true
		}
	case 4:
		st.state = 1
	}
	return false
}

package spec

import "math"

// LongRun returns the stationary loss probability (0..1) of the loss model,
// and whether losses are independent from packet to packet: only then is
// the number of losses among n packets binomial(n, p), which is what
// quicbench's loss checks (calibrate, the runner's validity warning) test.
func (l Loss) LongRun() (p float64, independent bool) {
	switch l.Model {
	case LossNone:
		return 0, true
	case LossRandom:
		return l.Percent / 100, l.Correlation == 0
	case LossGemodel:
		P, R, bad, good := l.P/100, l.R/100, l.BadLoss/100, l.GoodLoss/100
		if P == 0 {
			return good, true // never leaves the good state it starts in
		}
		// Memoryless only when the next state does not depend on the
		// current one (P + R = 1) or both states lose alike.
		return (R*good + P*bad) / (P + R), P+R == 1 || good == bad
	case LossState:
		return stateLoss(l), false
	}
	return 0, false
}

// stateLoss is the stationary loss rate of netem's 4-state model: the
// fraction of packets that leave the chain in state 3 (burst loss) or 4
// (isolated loss), found by power iteration.
func stateLoss(l Loss) float64 {
	p13, p31, p32, p23, p14 := l.P13/100, l.P31/100, l.P32/100, l.P23/100, l.P14/100
	// Transition matrix T[from][to], states 1..4 as 0..3, netem's rules.
	var T [4][4]float64
	T[0][2], T[0][3], T[0][0] = p13, p14, 1-p13-p14
	T[1][2], T[1][1] = p23, 1-p23
	T[2][0], T[2][1], T[2][2] = p31, p32, 1-p31-p32
	T[3][0] = 1
	pi := [4]float64{1, 0, 0, 0}
	for range 100000 {
		var next [4]float64
		for i := range 4 {
			for j := range 4 {
				next[j] += pi[i] * T[i][j]
			}
		}
		// Average with the previous step so periodic chains converge.
		var diff float64
		for j := range 4 {
			next[j] = (next[j] + pi[j]) / 2
			diff += math.Abs(next[j] - pi[j])
		}
		pi = next
		if diff < 1e-15 {
			break
		}
	}
	return pi[2] + pi[3]
}

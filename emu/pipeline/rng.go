package pipeline

import (
	"math"
	"math/rand/v2"
)

// Stage identifiers: each random stage draws from its own stream, derived
// from (seed, stage), so adding or removing one impairment never shifts
// another's decisions.
const (
	stageLoss uint64 = iota + 1
	stageDuplicate
	stageCorrupt
	stageDelay
	stageReorder
)

// stream is one stage's random number generator: PCG-DXSM (math/rand/v2),
// whose output is specified and therefore stable across Go releases.
type stream struct {
	pcg rand.PCG
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func newStream(seed, stage uint64) stream {
	a := splitmix64(seed ^ splitmix64(stage))
	b := splitmix64(a ^ stage<<32)
	var s stream
	s.pcg.Seed(a, b)
	return s
}

// u64 returns the next 64 random bits.
func (s *stream) u64() uint64 { return s.pcg.Uint64() }

// prob is a probability as a 53-bit threshold: an event happens when a
// draw's top 53 bits are below it. 0 never happens, 1<<53 always does.
type prob uint64

const probOne = prob(1) << 53

// newProb converts a percentage (0..100) to a prob.
func newProb(percent float64) prob {
	if percent <= 0 {
		return 0
	}
	if percent >= 100 {
		return probOne
	}
	return prob(math.Round(percent / 100 * float64(probOne)))
}

// hit reports whether draw x falls under p.
func (p prob) hit(x uint64) bool { return prob(x>>11) < p }

// unit maps a draw to a float64 strictly inside (0, 1).
func unit(x uint64) float64 { return (float64(x>>11) + 0.5) / (1 << 53) }

// chain is a two-state Markov chain giving Bernoulli events of probability
// p whose successive outcomes have correlation rho: after an event the next
// one has probability p+rho(1-p), after a non-event p(1-rho). Its stationary
// probability is exactly p (netem's "correlation" instead averages uniform
// draws, which lowers the effective probability; see docs/link-spec.md).
type chain struct {
	afterHit, afterMiss prob
	last                bool
}

func newChain(percent, corrPercent float64) chain {
	p, rho := percent/100, corrPercent/100
	return chain{
		afterHit:  newProb(100 * (p + rho*(1-p))),
		afterMiss: newProb(100 * p * (1 - rho)),
	}
}

func (c *chain) step(x uint64) bool {
	t := c.afterMiss
	if c.last {
		t = c.afterHit
	}
	c.last = t.hit(x)
	return c.last
}

// normQuantile is the standard normal quantile function.
func normQuantile(u float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*u) }

// normCDF is the standard normal distribution function.
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// paretoQuantile is netem's Pareto table (alpha 3, shifted and scaled to
// mean 0): increasing in q.
func paretoQuantile(q float64) float64 {
	return (math.Pow(1-q, -1.0/3) - 1.5) * 4 / 3
}

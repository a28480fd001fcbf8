package pipeline

import (
	"math"

	"github.com/quicbench/quicbench/emu/spec"
)

// jitterBound cuts every distribution at ±4 jitter (netem's tables hold
// values up to 32767/8192 ≈ 4).
const jitterBound = 4.0

// delayStage draws each packet's propagation delay: the base delay plus a
// jitter sample, one draw per packet (and one per duplicate copy).
type delayStage struct {
	base, jitter int64
	dist         spec.Distribution
	rho, rhoC    float64 // correlation and sqrt(1-rho²)
	z            float64 // AR(1) state of the correlated normal
	s            stream
}

func newDelayStage(l spec.Link, seed uint64) delayStage {
	d := delayStage{base: int64(l.Delay), jitter: int64(l.Jitter), dist: l.Distribution}
	if d.jitter > 0 {
		d.s = newStream(seed, stageDelay)
		d.rho = l.DelayCorr / 100
		d.rhoC = math.Sqrt(1 - d.rho*d.rho)
		if d.rho > 0 {
			d.z = normQuantile(unit(d.s.u64())) // start in the stationary distribution
		}
	}
	return d
}

// sample returns a delay in ns (never negative) from draw x. Correlated
// samples follow a Gaussian AR(1) process mapped onto the distribution
// (a Gaussian copula), so the distribution itself is the configured one
// whatever the correlation. A duplicate's copy draws uncorrelated.
func (d *delayStage) sample(x uint64, correlated bool) int64 {
	if d.jitter == 0 {
		return d.base
	}
	u := unit(x)
	var z, q float64 // normal score and uniform quantile of the sample
	if correlated && d.rho > 0 {
		d.z = d.rho*d.z + d.rhoC*normQuantile(u)
		z, q = d.z, normCDF(d.z)
	} else {
		q = u
		if d.dist == spec.DistNormal || d.dist == spec.DistParetoNormal {
			z = normQuantile(u)
		}
	}
	var t float64
	switch d.dist {
	case spec.DistUniform:
		t = 2*q - 1
	case spec.DistNormal:
		t = z
	case spec.DistPareto:
		t = paretoQuantile(q)
	case spec.DistParetoNormal:
		t = (z + 3*paretoQuantile(q)) / 4
	}
	t = max(-jitterBound, min(jitterBound, t))
	v := d.base + int64(math.Round(t*float64(d.jitter)))
	return max(v, 0)
}

package runner

import (
	"fmt"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/workload"
	"gonum.org/v1/gonum/stat/distuv"
)

// Validity thresholds.
const (
	// saturatedCPU flags a sample during which the machine's CPUs were
	// busier than this (the measurement may be CPU-bound, not network-bound).
	saturatedCPU = 0.95
	// clockSkew flags a sample during which the wall clock and the
	// monotonic clock disagreed by more than this (NTP step, suspend).
	clockSkew = 5 * time.Millisecond
	// lateShare flags a sample whose emulator took more than this share
	// of its packets (both directions) out of the link later than
	// emu.LateThreshold after their departure time: the p99 of its
	// delay error then misses the target (docs/performance.md).
	lateShare = 0.01
)

// warnings checks a sample s of cell c, over links up and down, with the
// agent's result res, against what was read around it: the emulator and
// the kernel must have dropped nothing outside the configured impairments,
// the machine must not have been saturated, the clocks must agree, and the
// sample must have met its configuration (validity).
func (w *window) warnings(c *model.Cell, up, down spec.Link, s *model.Sample, res *workload.Result) []string {
	b, a := &w.before, &w.after
	out := validity(c, up, down, s, res)
	if b.machErr == nil && a.machErr == nil {
		if u := sysinfo.Utilisation(b.mach, a.mach); u > saturatedCPU {
			// One text for every such sample, so that the report counts them
			// as one warning.
			out = append(out, fmt.Sprintf("machine CPU saturated: more than %.0f%% busy during the sample; the result may be CPU-bound", 100*saturatedCPU))
		}
	}
	if skew := w.end.Round(0).Sub(w.start.Round(0)) - w.end.Sub(w.start); skew > clockSkew || skew < -clockSkew {
		out = append(out, fmt.Sprintf("wall clock jumped by %v relative to the monotonic clock during the sample", skew))
	}
	out = append(out, forwarderWarnings(b.fw[0], b.fw[1], a.fw[0], a.fw[1])...)
	devOK := b.devErr == nil && a.devErr == nil
	dev := [2]uint64{a.dev[0] - b.dev[0], a.dev[1] - b.dev[1]}
	if devOK {
		if d := dev[0] + dev[1]; d > 0 {
			out = append(out, fmt.Sprintf("TUN device queues overflowed: %d packets dropped by the kernel outside the configured impairments", d))
		}
	}
	out = append(out, endpointLoss(c, s, outsideDrops(devOK, dev, b.fw, a.fw))...)
	return append(out, udpReceiveWarnings(b.udp, a.udp)...)
}

// forwarderWarnings turns what the emulator's forwarder counted during a
// sample (the counters before and after, per direction) into validity
// warnings: every packet it lost or mangled outside the configured
// impairments.
func forwarderWarnings(up0, down0, up1, down1 forward.Stats) []string {
	delta := func(f func(forward.Stats) uint64) uint64 { return f(up1) - f(up0) + f(down1) - f(down0) }
	var w []string
	if d := delta(func(s forward.Stats) uint64 { return s.PoolEmpty }); d > 0 {
		w = append(w, fmt.Sprintf("emulator packet pool exhausted: %d packets dropped outside the configured impairments", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.Oversize }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d packets larger than its buffers dropped outside the configured impairments", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.Malformed }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d malformed offload super-packets dropped", d))
	}
	if d := delta(func(s forward.Stats) uint64 { return s.WriteErrors }); d > 0 {
		w = append(w, fmt.Sprintf("emulator: %d packets refused by the TUN device", d))
	}
	return w
}

// Endpoint-side loss check of QUIC samples (endpointLoss).
const (
	// A QUIC sender's declared losses must exceed the packets dropped on
	// the way by more than max(endpointLossMin, endpointLossFraction × the
	// packets it sent) before the rest is put down to the receiver. Over a
	// link that does not reorder, and with a receiver that keeps up, the
	// excess is a few packets: lost MTU probes (quic-go counts them), and
	// over a lossy link packets received but acknowledged only in ACK
	// ranges that quic-go's receiver stopped reporting (it keeps 64), whose
	// number grows with the packets in flight; the fraction keeps large
	// transfers from being flagged for those. In runs stored on the
	// reference machine, QUIC samples over links that did not reorder
	// (loss of 1-5% without delay, delay of 10-50 ms each way without
	// loss) had excesses of at most 7 packets; over links with jitter,
	// which reorders and is not checked, up to 43; over links without any
	// impairment, where receivers could not keep up, up to 1,603 in
	// samples of 800 to 9,000 packets.
	endpointLossMin      = 10
	endpointLossFraction = 0.005
)

// outsideDrops returns, per direction (up, down), the packets lost between
// the sending and the receiving namespace outside the link's model: dropped
// from a TUN device's queue (dev, the sample's per-direction counts, valid
// when devOK), or by the forwarder (counters fw0 before and fw1 after the
// sample: pool exhausted, oversize, refused by the output device). It is
// model.NotMeasured for a direction when that is not known: the device
// counters could not be read, or the forwarder dropped malformed
// super-packets, whose wire packets it does not count.
func outsideDrops(devOK bool, dev [2]uint64, fw0, fw1 [2]forward.Stats) [2]int64 {
	out := [2]int64{model.NotMeasured, model.NotMeasured}
	if !devOK {
		return out
	}
	for i := range out {
		a, b := fw0[i], fw1[i]
		if b.Malformed != a.Malformed {
			continue
		}
		out[i] = int64(dev[i] + b.PoolEmpty - a.PoolEmpty + b.Oversize - a.Oversize + b.WriteErrors - a.WriteErrors)
	}
	return out
}

// endpointLoss compares, per direction of a QUIC sample (protocol h3 or
// quic), the packets the sending endpoint declared lost (the sum of
// PacketsLost over its connections' transport statistics: the client's for
// up, the server's for down) with the packets dropped on the way: by the
// link (loss model, queue, corruption, blackout, flush) and outside it
// (outside, per direction, as outsideDrops returns). A direction gets a
// warning when the declared losses exceed those drops by more than
// max(endpointLossMin, endpointLossFraction × the sender's packets sent):
// the rest were lost at the receiving end, whose quic-go discarded them
// (its queue of unprocessed packets full) or whose kernel did (the socket
// buffer full). A direction whose link reordered packets is not checked,
// since reordering makes QUIC declare losses that were none; nor one
// without the sender's statistics, with a count not measured, or with
// outside drops not known.
func endpointLoss(c *model.Cell, s *model.Sample, outside [2]int64) []string {
	if !model.IsQUIC(c.Protocol) {
		return nil
	}
	var w []string
	for i, d := range []struct {
		dir, sender, receiver string
		k                     emu.Counters
	}{{"up", "client", "server", s.LinkUp}, {"down", "server", "client", s.LinkDown}} {
		if d.k.Reordered > 0 || outside[i] < 0 {
			continue
		}
		var lost, sent int64
		conns, known := 0, true
		for _, t := range s.Transport {
			side := t.Side
			if side == "" {
				side = "client"
			}
			if t.Kind != "quic" || side != d.sender {
				continue
			}
			if t.PacketsLost < 0 || t.PacketsSent < 0 {
				known = false
				break
			}
			lost += t.PacketsLost
			sent += t.PacketsSent
			conns++
		}
		if !known || conns == 0 {
			continue
		}
		k := d.k
		dropped := int64(k.DropLoss+k.DropQueue+k.DropCorrupt+k.DropOff+k.DropMTU+k.DropFlush) + outside[i]
		if float64(lost-dropped) <= max(endpointLossMin, endpointLossFraction*float64(sent)) {
			continue
		}
		w = append(w, fmt.Sprintf("%s: the QUIC sender (%s) declared %d packets lost where the link dropped %d: the rest were lost at the receiving end (quic-go discards packets when its queue of unprocessed packets is full, the kernel when the socket buffer is full): the %s could not keep up",
			d.dir, d.sender, lost, dropped, d.receiver))
	}
	return w
}

// udpReceiveWarnings warns about every namespace whose kernel dropped UDP
// datagrams between readings a and b because the receiving socket's buffer
// was full; a side read in error either time gets no warning.
func udpReceiveWarnings(a, b udpDrops) []string {
	var w []string
	for _, s := range []netns.Side{netns.Client, netns.Server} {
		if a.ok[s] && b.ok[s] && b.n[s] > a.n[s] {
			w = append(w, fmt.Sprintf("%s namespace: %d UDP datagrams dropped because the receiving socket's buffer was full (UdpRcvbufErrors)", s, b.n[s]-a.n[s]))
		}
	}
	return w
}

// validity checks what the sample met against what was configured.
func validity(c *model.Cell, up, down spec.Link, s *model.Sample, res *workload.Result) []string {
	var w []string
	check := func(dir string, l spec.Link, k emu.Counters) {
		if k.DropQueue > 0 && !l.HasBottleneck() {
			pk, _ := l.QueueLimit()
			w = append(w, fmt.Sprintf("%s: %d packets dropped by the queue limit on a link without a rate limit: as in netem, packets in the delay line count against limit (%d packets); raise limit if these drops are not wanted", dir, k.DropQueue, pk))
		}
	}
	check("up", up, s.LinkUp)
	check("down", down, s.LinkDown)
	if m := lossAnomaly("up", up.Loss, s.LinkUp); m != "" {
		w = append(w, m)
	}
	if m := lossAnomaly("down", down.Loss, s.LinkDown); m != "" {
		w = append(w, m)
	}
	if m := lateDepartures(s.LinkUp, s.LinkDown); m != "" {
		w = append(w, m)
	}
	// The congestion control of the TCP connections is checked by recordCC
	// (ccwatch.go): a sample that ran another one than the cell's is invalid.
	return w
}

// lateDepartures says when the emulator took more than lateShare of a
// sample's packets out of the link later than emu.LateThreshold after
// their departure time (Counters.LateOut): the forwarding threads were
// held back (a machine short of CPU, or a hypervisor), and those packets
// took longer than the link prescribes. "" when it did not.
func lateDepartures(up, down emu.Counters) string {
	late, out := up.LateOut+down.LateOut, up.PacketsOut+down.PacketsOut
	if late == 0 || float64(late) <= lateShare*float64(out) {
		return ""
	}
	return fmt.Sprintf("emulator late: %d of %d packets (%.1f%%) left the link more than %d us after their departure time: the machine held the forwarding threads back, so these packets took longer than the link prescribes",
		late, out, 100*float64(late)/float64(out), emu.LateThreshold/1000)
}

// Loss fidelity check.
const (
	// lossCheckMinPackets is the least number of packets a direction must
	// carry in a sample before its loss count is checked.
	lossCheckMinPackets = 100
	// lossCheckAlpha: a loss count outside the central 1-lossCheckAlpha
	// (99.9%) interval of the binomial distribution is flagged, so about
	// one direction in a thousand is flagged by chance alone.
	lossCheckAlpha = 0.001
)

// lossAnomaly checks the packets the loss model dropped in one direction
// of a sample (k.DropLoss) against the configured loss: with independent
// losses of probability p over n packets, the count is binomial(n, p). A
// count outside the central 99.9% interval means that the emulator did not
// lose what was asked; the returned warning says so ("" if the count is
// plausible, if fewer than lossCheckMinPackets packets were decided on, or
// if the loss model is bursty, whose counts vary more than a binomial's).
func lossAnomaly(dir string, l spec.Loss, k emu.Counters) string {
	p, ok := l.LongRun()
	if !ok || k.DropOff > k.PacketsIn {
		return ""
	}
	// The loss model decides every packet offered to the link except those
	// dropped by a blackout first.
	n := k.PacketsIn - k.DropOff
	if n < lossCheckMinPackets {
		return ""
	}
	lo, hi := binomialInterval(n, p, lossCheckAlpha)
	if k.DropLoss >= lo && k.DropLoss <= hi {
		return ""
	}
	return fmt.Sprintf("%s: the loss model dropped %d of %d packets (%.2f%%), outside the %g%% binomial interval [%d, %d] of the configured loss %g%%: the link did not lose what was asked",
		dir, k.DropLoss, n, 100*float64(k.DropLoss)/float64(n), 100*(1-lossCheckAlpha), lo, hi, 100*p)
}

// binomialInterval returns the central 1-alpha interval [lo, hi] of a
// binomial(n, p) count: lo is the smallest k with P(X <= k) >= alpha/2, hi
// the smallest k with P(X <= k) >= 1-alpha/2.
func binomialInterval(n uint64, p, alpha float64) (lo, hi uint64) {
	switch {
	case p <= 0:
		return 0, 0
	case p >= 1:
		return n, n
	}
	b := distuv.Binomial{N: float64(n), P: p}
	quantile := func(q float64) uint64 {
		a, z := uint64(0), n // the answer is in [a, z]
		for a < z {
			m := a + (z-a)/2
			if b.CDF(float64(m)) >= q {
				z = m
			} else {
				a = m + 1
			}
		}
		return a
	}
	return quantile(alpha / 2), quantile(1 - alpha/2)
}

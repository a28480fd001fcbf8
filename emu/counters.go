package emu

// Counters are the per-direction statistics of a link. All fields are
// cumulative since the pipeline was built; subtract two snapshots (Sub) for the
// figures of an interval.
type Counters struct {
	PacketsIn   uint64 // packets offered to the link
	BytesIn     uint64 // bytes offered to the link
	PacketsOut  uint64 // packets delivered by the link (duplicates included)
	BytesOut    uint64 // bytes delivered by the link
	DropLoss    uint64 // packets dropped by the loss model (random or gemodel)
	DropQueue   uint64 // packets dropped because the queue was full (limit / queue / codel)
	DropCorrupt uint64 // packets corrupted (delivered with a flipped bit; the receiver's checksum drops them)
	DropOff     uint64 // packets dropped during an onoff blackout
	// DropMTU counts packets dropped because they were larger than the
	// link's MTU (mtu BYTES); in icmp mode the forwarder answered those
	// that had DF set with ICMP "fragmentation needed".
	DropMTU    uint64
	Duplicated uint64 // extra copies made by duplicate
	// Reordered counts late packets (RFC 4737): a delivered packet is
	// reordered if a packet that entered the link after it (a duplicate's
	// copy counts as entering right after its original) was delivered
	// before it. A link that swaps two packets counts 1.
	Reordered uint64
	// Queue delay: time from entering the link to leaving it, minus the
	// configured propagation delay and jitter (i.e. time spent waiting for the
	// rate limiter / trace / blackout), over delivered packets.
	QueueDelaySumNs uint64
	QueueDelayMaxNs uint64
	// DropFlush counts packets discarded by Pipeline.Flush (reconfiguration),
	// so that PacketsIn + Duplicated = PacketsOut + every Drop* except
	// DropCorrupt + the packets still held.
	DropFlush uint64
	// LateOut counts delivered packets that the driver took out of the
	// link more than LateThreshold after their departure time: the
	// machine held the forwarding thread back, so these packets took
	// longer than the link prescribes. A driver in virtual time (the
	// model replays, the tests) is never late.
	LateOut uint64
}

// LateThreshold is how late a departure may be before Counters.LateOut
// counts it: the emulator's p99 delay-error target (docs/performance.md).
const LateThreshold Time = 150_000

// Sub returns c - prev for the cumulative fields; QueueDelayMaxNs is c's.
func (c Counters) Sub(prev Counters) Counters {
	return Counters{
		PacketsIn:       c.PacketsIn - prev.PacketsIn,
		BytesIn:         c.BytesIn - prev.BytesIn,
		PacketsOut:      c.PacketsOut - prev.PacketsOut,
		BytesOut:        c.BytesOut - prev.BytesOut,
		DropLoss:        c.DropLoss - prev.DropLoss,
		DropQueue:       c.DropQueue - prev.DropQueue,
		DropCorrupt:     c.DropCorrupt - prev.DropCorrupt,
		DropOff:         c.DropOff - prev.DropOff,
		DropMTU:         c.DropMTU - prev.DropMTU,
		Duplicated:      c.Duplicated - prev.Duplicated,
		Reordered:       c.Reordered - prev.Reordered,
		QueueDelaySumNs: c.QueueDelaySumNs - prev.QueueDelaySumNs,
		QueueDelayMaxNs: c.QueueDelayMaxNs,
		DropFlush:       c.DropFlush - prev.DropFlush,
		LateOut:         c.LateOut - prev.LateOut,
	}
}

// MeanQueueDelayNs is the mean queue delay over delivered packets.
func (c Counters) MeanQueueDelayNs() float64 {
	if c.PacketsOut == 0 {
		return 0
	}
	return float64(c.QueueDelaySumNs) / float64(c.PacketsOut)
}

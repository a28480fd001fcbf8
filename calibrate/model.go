package calibrate

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
)

// modelResult is what the configured link does, in exact virtual time, to
// the packets a phase sent: the emulator's own pipeline (the executable
// definition of the link spec, unit-tested against netem's semantics) fed
// the same packets, in the same order, at their send times. With the same
// seed it draws the same per-packet decisions as the real link, so its
// delays are the "configured" delays of exactly these probes.
type modelResult struct {
	first     []int64 // first intact delivery time of each probe; 0: none
	copies    []uint32
	late      int // probes delivered after a higher-numbered one
	delivered int // probes with at least one intact copy
}

// replay runs recs (in send order) through a pipeline built from l and seed.
// probes is the number of probes among recs.
func replay(l spec.Link, seed uint64, recs []sendRec, probes int) (*modelResult, error) {
	// The pool must never run dry (a duplicate would silently not be made):
	// start small and retry bigger.
	for size := 4096; ; size *= 4 {
		m, exhausted, err := replayWithPool(l, seed, recs, probes, size)
		if err != nil {
			return nil, err
		}
		if !exhausted {
			return m, nil
		}
		if size > 2*len(recs)+16 {
			return nil, errors.New("model replay: packet pool exhausted")
		}
	}
}

// Replay packets are IPv4-shaped (so that corruption lands past the
// header, as on the real link): the probe number + 1 sits in the source
// address field (0 for load packets), the payload is zero, and a delivered
// packet with a non-zero payload byte was corrupted.
const replayHeader = 20

func replayWithPool(l spec.Link, seed uint64, recs []sendRec, probes, poolSize int) (*modelResult, bool, error) {
	pool := emu.NewPool(poolSize, bulkPayload+ipUDPOverhead)
	p, err := pipeline.New(l, seed, pool)
	if err != nil {
		return nil, false, fmt.Errorf("model replay: %w", err)
	}
	m := &modelResult{first: make([]int64, probes), copies: make([]uint32, probes)}
	maxSeq := int64(-1)
	exhausted := false
	deliver := func(now emu.Time) {
		for pkt := p.Dequeue(now); pkt != nil; pkt = p.Dequeue(now) {
			id := int64(binary.BigEndian.Uint32(pkt.Data[12:16])) - 1
			intact := true
			for _, c := range pkt.Data[replayHeader:] {
				if c != 0 {
					intact = false
					break
				}
			}
			pool.Put(pkt)
			if id < 0 || id >= int64(probes) || !intact {
				continue
			}
			if m.copies[id] == 0 {
				m.first[id] = int64(now)
				m.delivered++
				if id < maxSeq {
					m.late++
				} else {
					maxSeq = id
				}
			}
			m.copies[id]++
		}
	}
	// advance delivers everything due up to t, at the exact due times.
	advance := func(t emu.Time, all bool) {
		for guard := 0; guard < 1<<26; guard++ {
			d, ok := p.NextDeadline()
			if !ok || (!all && d > t) {
				return
			}
			deliver(d)
		}
	}
	for _, r := range recs {
		advance(emu.Time(r.t), false)
		pkt := pool.Get()
		if pkt == nil || pool.Available() == 0 {
			exhausted = true
			if pkt != nil {
				pool.Put(pkt)
			}
			break
		}
		pkt.Data = pkt.Data[:r.size]
		clear(pkt.Data)
		pkt.Data[0] = 0x45
		binary.BigEndian.PutUint16(pkt.Data[2:], uint16(r.size))
		binary.BigEndian.PutUint32(pkt.Data[12:], uint32(r.probe+1))
		p.Enqueue(emu.Time(r.t), pkt)
	}
	if !exhausted {
		advance(0, true)
	}
	return m, exhausted, nil
}

package forward

import (
	"fmt"

	"github.com/quicbench/quicbench/emu/pipeline"
)

// Tap returns path i's packet tap, or nil when the forwarder was started
// without Options.Tap.
func (f *Forwarder) Tap(i int) *Tap {
	if i < 0 || i >= len(f.paths) {
		return nil
	}
	return f.paths[i].tap
}

// Mark has path i's thread take a TapMark between two packets and returns
// it: the link's counters at that instant, exact (Pipeline.Sync), and the
// tap's position. Records whose Seq is below the mark's were decided
// before it, the others after. It works without a tap too (Seq and Cut
// are then 0): the counters are exact, where Counters may lag during
// traffic. Like SetLink it waits for the thread, which answers when it
// next wakes (at once when it sleeps).
func (f *Forwarder) Mark(i int) (TapMark, error) {
	if i < 0 || i >= len(f.paths) {
		return TapMark{}, fmt.Errorf("forward: Mark(%d): no such path", i)
	}
	p := f.paths[i]
	ch := make(chan TapMark, 1)
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return TapMark{}, fmt.Errorf("forward %s: stopped", p.name)
	}
	if p.marks != nil {
		p.mu.Unlock()
		return TapMark{}, fmt.Errorf("forward %s: concurrent Mark", p.name)
	}
	p.marks = ch
	p.mu.Unlock()
	p.signal()
	m, ok := <-ch
	if !ok {
		return TapMark{}, fmt.Errorf("forward %s: stopped", p.name)
	}
	return m, nil
}

// mark takes a TapMark on the path's thread, link being its pipeline.
func (p *path) mark(link *pipeline.Pipeline) TapMark {
	m := TapMark{Counters: link.Sync()}
	if p.tap != nil {
		m.Seq, m.Cut = p.tap.mark()
	}
	return m
}

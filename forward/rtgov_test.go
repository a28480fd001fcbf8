package forward

import (
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
)

func TestRTGovernor(t *testing.T) {
	ms := func(n int64) emu.Time { return emu.Time(n * int64(time.Millisecond)) }
	cpu := func(n int64) int64 { return n * int64(time.Millisecond) }
	var g rtGovernor
	g.start(ms(1000), cpu(5))
	if g.due(ms(1099)) || !g.due(ms(1100)) {
		t.Fatal("window of 100 ms not respected")
	}
	steps := []struct {
		now, cpu int64
		want     rtChange
		why      string
	}{
		{1100, 85, rtKeep, "80% busy is not above the limit"},
		{1200, 166, rtShed, "81% busy: leave SCHED_FIFO"},
		{1300, 266, rtKeep, "100% busy while shed: stay"},
		{1400, 316, rtKeep, "50% busy is not below the resume limit"},
		{1500, 365, rtResume, "49% busy: back to SCHED_FIFO"},
		{1600, 370, rtKeep, "5% busy under SCHED_FIFO"},
		{1800, 540, rtShed, "a long window counts as a whole: 170 of 200 ms"},
	}
	for _, s := range steps {
		if got := g.step(ms(s.now), cpu(s.cpu)); got != s.want {
			t.Fatalf("at %d ms with %d ms of CPU: got %v, want %v (%s)", s.now, s.cpu, got, s.want, s.why)
		}
	}
	if got := g.step(ms(1800), cpu(600)); got != rtKeep {
		t.Errorf("an empty window changed the policy: %v", got)
	}
}

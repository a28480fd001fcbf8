package netns

import "github.com/quicbench/quicbench/forward"

// Tap returns direction i's packet tap (0 up, 1 down), nil unless the
// testbed was built with Config.Tap. With Mark it makes a Testbed a
// capture.Source.
func (t *Testbed) Tap(i int) *forward.Tap { return t.fwd.Tap(i) }

// Mark takes an instant of direction i on its forwarding thread: the
// link's exact counters and the tap's position (forward.Forwarder.Mark).
func (t *Testbed) Mark(i int) (forward.TapMark, error) { return t.fwd.Mark(i) }

package pipeline_test

import (
	"fmt"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
)

// Parse a link spec, build one direction of the link from it, and run a
// burst of packets through it in virtual time: the caller owns the clock,
// so the run takes microseconds and gives the same result for the same seed.
func Example() {
	link, err := spec.Parse("rate 10mbit delay 20ms loss 1%")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("link:", link)

	pool := emu.NewPool(512, 2048)
	p, err := pipeline.New(link, 42, pool) // the seed fixes every loss decision
	if err != nil {
		fmt.Println(err)
		return
	}

	// Offer 100 packets of 1250 bytes (1 ms each at 10 Mbit/s) at time 0,
	// as one burst.
	var now emu.Time
	for range 100 {
		pkt := pool.Get()
		pkt.Data = pkt.Data[:1250]
		p.Enqueue(now, pkt)
	}

	// Jump from one delivery to the next until the link is empty.
	var delivered int
	var last emu.Time
	for {
		next, ok := p.NextDeadline()
		if !ok {
			break
		}
		now = next
		for pkt := p.Dequeue(now); pkt != nil; pkt = p.Dequeue(now) {
			delivered++
			last = now
			pool.Put(pkt)
		}
	}
	c := p.Counters()
	fmt.Printf("delivered %d of %d, %d lost, last at %v\n",
		delivered, c.PacketsIn, c.DropLoss, time.Duration(last))
	// Output:
	// link: delay 20ms loss 1% rate 10mbit
	// delivered 99 of 100, 1 lost, last at 119ms
}

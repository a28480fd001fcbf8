// Package forward moves packets between TUN devices through emulator
// pipelines: it is the router of a quicbench testbed.
//
// Each direction (Path) is served by one dedicated OS thread, locked for
// its lifetime, with 1 ns timer slack. The thread alternates between
// delivering every packet whose departure time has come, reading the
// packets waiting on its input device (up to a batch, interrupted as soon
// as a departure falls due), and sleeping in ppoll(2) on the input device
// with a nanosecond timeout set to the pipeline's next deadline. Right
// after the input was seen empty (a read batch that drained it, a ppoll
// that timed out) the thread serves its departures and sleeps without
// reading again: ppoll reports at once what arrived meanwhile, and a packet
// costs one read, one write and its wake-ups, not the extra reads that
// would find nothing (Stats.EmptyReads counts the ones left). The
// pipeline is only ever touched by that thread; packets come from a Pool,
// so the hot path does not allocate.
//
// A path whose devices carry a virtio_net_hdr (tun.Options.VnetHdr with
// TSO/USO offloads) moves super-packets of up to 64 KB per read and write:
// each one read is cut into its wire packets (tun/offload.SegmentFrom, in
// batches of pool buffers, so a small MSS never drops it whole) before
// the pipeline, so every impairment still applies per wire packet, and the
// packets that leave the pipeline at the same instant are merged back
// (offload.Coalescer, like GRO) into as few writes as possible. Over a link
// that impairs nothing (pipeline.Transparent) a super-packet is written on
// as it was read, and counted per wire packet (offload.WireSize).
//
// With Options.Realtime the threads run under SCHED_FIFO, so that a busy
// machine does not delay their wake-ups by a scheduler time slice; a thread
// that is itself busy more than 80% of the time moves to the normal
// scheduler until it is less busy, so that the kernel's real-time
// throttling never stops it (rtgov.go).
package forward

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/tun"
	"github.com/quicbench/quicbench/tun/offload"
	"golang.org/x/sys/unix"
)

// Path is one direction of forwarding: packets read from From go through
// Link and leave through To.
type Path struct {
	Name     string // for errors, e.g. "up"
	From, To *tun.Device
	Link     *pipeline.Pipeline
	Pool     *emu.Pool // the pool Link was built with; packets are read into it
	// Router is the emulated router's IPv4 address on From's side: the
	// source of the ICMP "fragmentation needed" messages sent back into
	// From for packets above the link's MTU (spec mtu ... icmp). It should
	// be an address From's namespace routes through From. When it is not
	// valid, a message comes from the dropped packet's destination.
	Router netip.Addr
}

// Stats are a direction's counters outside the pipeline.
type Stats struct {
	ReadErrors  uint64 // failed reads from the input device
	WriteErrors uint64 // packets the output device refused (e.g. a corrupted IP version)
	// PoolEmpty counts wire packets read and discarded because the pool
	// was exhausted: with offloads, only the segments of a super-packet
	// beyond the buffers the pool could supply (the others go through).
	PoolEmpty uint64
	Malformed uint64 // super-packets that could not be segmented, dropped
	// Oversize counts wire packets discarded because a segment is larger
	// than the pool's buffers (a GSO size above the buffer size).
	Oversize uint64
	Reads    uint64 // successful reads from the input device
	// EmptyReads counts reads that found the input device empty (EAGAIN):
	// system calls spent learning that nothing waits.
	EmptyReads uint64
	Writes     uint64 // successful writes to the output device
	// FragNeeded counts ICMP "fragmentation needed" messages written back
	// into the input device, one per packet dropped above the link's MTU
	// in icmp mode (a failed write counts in WriteErrors instead).
	FragNeeded uint64
	// TooBigSilent counts packets dropped above the MTU in icmp mode that
	// got no answer, as a router gives none: without Don't Fragment (a
	// router would have fragmented them), IPv6, ICMP errors, fragments
	// other than the first.
	TooBigSilent uint64
	Wakeups      uint64 // times the thread returned from ppoll
	// Timer wake-ups (ppoll returned because a departure fell due) and how
	// late they were: the emulator's own timing error, before the kernel
	// delivers the packet.
	TimerWakeups uint64
	LateSumNs    uint64
	LateMaxNs    uint64
	Realtime     bool // the thread was granted SCHED_FIFO
	// Shed counts the times the thread left SCHED_FIFO for the normal
	// scheduler because it was busy more than 80% of the time (and so would
	// be stopped by the kernel's real-time throttling; see rtgov.go); it
	// returns once it is busy less than half the time.
	Shed uint64
}

// Options tune a Forwarder.
type Options struct {
	// TimerAdvance wakes the thread ahead of each departure by the mean
	// wake-up latency the kernel has shown so far (at most 100 us) and
	// busy-waits the rest, trading a little CPU for precision on machines
	// (VMs) whose timers fire tens of microseconds late.
	TimerAdvance bool
	// Realtime asks for SCHED_FIFO (priority RealtimePriority) on the
	// forwarding threads; without the privilege (CAP_SYS_NICE), the threads
	// stay on the normal scheduler and Stats.Realtime says so. A thread
	// busy more than 80% of the time moves to the normal scheduler until it
	// is less busy (Stats.Shed), so that the kernel's real-time throttling
	// (sched_rt_runtime_us, 95% by default) never stops it.
	Realtime bool
	// CPUs, when not empty, pins the forwarding threads to these CPUs
	// (sched_setaffinity), e.g. to keep the emulator off the CPUs of the
	// endpoints it serves; Start fails if the set cannot be applied.
	CPUs []int
	// Tap, when not nil, records every wire packet of every path in the
	// path's Tap (tap.go): package capture writes them to pcapng.
	Tap *TapOptions
}

// RealtimePriority is the SCHED_FIFO priority of realtime forwarding
// threads: low among real-time tasks, above every normal one.
const RealtimePriority = 10

// Forwarder runs the directions given to Start until Close.
type Forwarder struct {
	paths     []*path
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type path struct {
	name        string
	from, to    *tun.Device
	pool        *emu.Pool
	clock       emu.Clock
	link        atomic.Pointer[pipeline.Pipeline]
	wake        int // eventfd
	mu          sync.Mutex
	pending     *pipeline.Pipeline // replacement link, taken by the thread
	pendingPool *emu.Pool
	swapped     chan struct{}
	exited      bool         // under mu: the thread has stopped
	tid         atomic.Int32 // the thread id while it runs
	stop        atomic.Bool
	err         error // why the thread stopped early

	realtime bool
	advance  bool
	cpus     []int // Options.CPUs
	rtDone   atomic.Bool

	readErrors, writeErrors, poolEmpty, malformed, oversize, reads, writes, wakeups atomic.Uint64
	emptyReads, timerWakeups, lateSum, lateMax, shed                                atomic.Uint64
	fragNeeded, tooBigSilent                                                        atomic.Uint64

	router netip.Addr                                 // Path.Router
	icmp   [offload.VirtioNetHdrLen + icmpMaxLen]byte // an ICMP message being sent, behind a zero virtio_net_hdr

	tap   *Tap         // Options.Tap; nil without one
	marks chan TapMark // under mu: a Mark waiting for the thread
}

const (
	// readBatch bounds the packets read in a row before due departures are
	// served again.
	readBatch = 64
	// checkEvery: while reading a batch, look at the next deadline every
	// this many packets.
	checkEvery = 8
)

// Start starts one thread per path. clock must be the monotonic clock the
// pipelines' times refer to. Both devices of a path must agree on VnetHdr.
func Start(clock emu.Clock, opts Options, paths ...Path) (*Forwarder, error) {
	f := &Forwarder{}
	if len(opts.CPUs) > 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("forward: sched_getaffinity: %w", err)
		}
		for _, c := range opts.CPUs {
			if c < 0 || c >= 1024 || !set.IsSet(c) {
				return nil, fmt.Errorf("forward: CPU %d is not one this process may run on", c)
			}
		}
	}
	for _, p := range paths {
		if p.From == nil || p.To == nil || p.Link == nil || p.Pool == nil {
			f.closeWakes()
			return nil, fmt.Errorf("forward: path %q is incomplete", p.Name)
		}
		if p.From.VnetHdr() != p.To.VnetHdr() {
			f.closeWakes()
			return nil, fmt.Errorf("forward: path %q: devices disagree on virtio_net_hdr", p.Name)
		}
		wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			f.closeWakes()
			return nil, fmt.Errorf("forward: eventfd: %w", err)
		}
		pp := &path{cpus: opts.CPUs, name: p.Name, from: p.From, to: p.To, pool: p.Pool, clock: clock, wake: wake, realtime: opts.Realtime, advance: opts.TimerAdvance, router: p.Router}
		f.paths = append(f.paths, pp)
		if opts.Tap != nil {
			if pp.tap, err = newTap(*opts.Tap, p.Pool.BufSize(), p.From.VnetHdr()); err != nil {
				f.closeWakes()
				return nil, err
			}
			p.Link.SetObserver(pp.tap)
		}
		pp.link.Store(p.Link)
	}
	reserveProcs(len(f.paths))
	for _, p := range f.paths {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			p.run()
		}()
	}
	return f, nil
}

func (f *Forwarder) closeWakes() {
	for _, p := range f.paths {
		unix.Close(p.wake)
	}
}

// Counters returns the counters of path i's current pipeline.
func (f *Forwarder) Counters(i int) emu.Counters { return f.paths[i].link.Load().Counters() }

// Stats returns path i's forwarder counters.
func (f *Forwarder) Stats(i int) Stats {
	p := f.paths[i]
	return Stats{
		ReadErrors:   p.readErrors.Load(),
		WriteErrors:  p.writeErrors.Load(),
		PoolEmpty:    p.poolEmpty.Load(),
		Malformed:    p.malformed.Load(),
		Oversize:     p.oversize.Load(),
		Reads:        p.reads.Load(),
		EmptyReads:   p.emptyReads.Load(),
		Writes:       p.writes.Load(),
		FragNeeded:   p.fragNeeded.Load(),
		TooBigSilent: p.tooBigSilent.Load(),
		Wakeups:      p.wakeups.Load(),
		TimerWakeups: p.timerWakeups.Load(),
		LateSumNs:    p.lateSum.Load(),
		LateMaxNs:    p.lateMax.Load(),
		Realtime:     p.rtDone.Load(),
		Shed:         p.shed.Load(),
	}
}

// CPUTime returns the CPU time the forwarding threads have used so far
// (from /proc/self/task/TID/schedstat), e.g. to measure the emulator's cost
// over an interval. Threads that have stopped are not counted.
func (f *Forwarder) CPUTime() time.Duration {
	var total time.Duration
	for _, p := range f.paths {
		tid := p.tid.Load()
		if tid == 0 {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(tid)) + "/schedstat")
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			ns, _ := strconv.ParseInt(fs[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// SetLink replaces path i's pipeline, and its pool when pool is not nil
// (link must have been built with the pool the path will use). The path's
// thread drops the packets queued in the old pipeline and continues with the
// new one; SetLink returns once it has switched.
func (f *Forwarder) SetLink(i int, link *pipeline.Pipeline, pool *emu.Pool) error {
	if i < 0 || i >= len(f.paths) || link == nil {
		return fmt.Errorf("forward: SetLink(%d): no such path or nil link", i)
	}
	p := f.paths[i]
	done := make(chan struct{})
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return fmt.Errorf("forward %s: stopped", p.name)
	}
	if p.swapped != nil {
		p.mu.Unlock()
		return fmt.Errorf("forward %s: concurrent SetLink", p.name)
	}
	if p.tap != nil {
		link.SetObserver(p.tap) // not driven yet: the thread takes it below
	}
	p.pending, p.pendingPool, p.swapped = link, pool, done
	p.mu.Unlock()
	p.signal()
	<-done
	if p.link.Load() != link {
		return fmt.Errorf("forward %s: stopped", p.name)
	}
	return nil
}

// Close stops the threads (dropping the packets still queued) and returns
// the first error one of them stopped on. It does not close the devices.
func (f *Forwarder) Close() error {
	var errs []error
	f.closeOnce.Do(func() {
		for _, p := range f.paths {
			p.stop.Store(true)
			p.signal()
		}
		f.wg.Wait()
		releaseProcs(len(f.paths))
		for _, p := range f.paths {
			unix.Close(p.wake)
			errs = append(errs, p.err)
		}
	})
	return errors.Join(errs...)
}

func (p *path) signal() {
	var one = [8]byte{1}
	unix.Write(p.wake, one[:])
}

func (p *path) run() {
	rt, release, slackErr := preciseThread(p.realtime, p.cpus)
	defer release()
	p.tid.Store(int32(unix.Gettid()))
	defer p.tid.Store(0)
	if slackErr != nil {
		p.err = fmt.Errorf("forward %s: thread setup (timer slack, CPU affinity): %w", p.name, slackErr)
	}
	p.rtDone.Store(rt)
	link := p.link.Load()
	defer func() {
		link.Flush()
		p.mu.Lock()
		p.exited = true
		if p.swapped != nil {
			close(p.swapped)
			p.pending, p.pendingPool, p.swapped = nil, nil, nil
		}
		if p.marks != nil {
			close(p.marks)
			p.marks = nil
		}
		p.mu.Unlock()
	}()
	var io ioPlain
	var vio *ioVnet
	if p.from.VnetHdr() {
		vio = newIOVnet()
	}
	fds := []unix.PollFd{
		{Fd: int32(p.from.Fd()), Events: unix.POLLIN},
		{Fd: int32(p.wake), Events: unix.POLLIN},
	}
	var ts unix.Timespec
	var evbuf [8]byte
	wk := waker{adaptive: p.advance}
	var rs readState
	var gov rtGovernor
	govern := p.rtDone.Load()
	if govern {
		gov.start(p.clock.Now(), threadCPU())
	}
	for {
		if govern {
			if now := p.clock.Now(); gov.due(now) {
				switch gov.step(now, threadCPU()) {
				case rtShed:
					if setNormal() == nil {
						p.shed.Add(1)
					}
				case rtResume:
					_ = setFIFO(RealtimePriority)
				}
			}
		}
		// Deliver what is due.
		if vio != nil {
			vio.deliver(p, link)
		} else {
			io.deliver(p, link)
		}
		// Take in what waits, until a departure falls due, unless the
		// input was just found empty (see readState).
		if rs.shouldRead() {
			n, empty := 0, false
			for n < readBatch {
				var ok bool
				if vio != nil {
					ok = vio.receive(p, link)
				} else {
					ok = io.receive(p, link)
				}
				if !ok {
					empty = true
					break
				}
				n++
				if n%checkEvery == 0 {
					if d, ok := link.NextDeadline(); dueBy(p.clock.Now(), d, ok) {
						break
					}
				}
			}
			if rs.read(n, empty) {
				continue // serve what may now be due, then read again or sleep
			}
		}
		d, ok := link.NextDeadline()
		pl := wk.plan(p.clock.Now(), d, ok)
		switch pl.action {
		case wakeServe:
			continue
		case wakeSpin:
			p.spinUntil(pl.due)
			continue
		}
		ts = unix.NsecToTimespec(pl.timeout)
		ready, err := ppoll(fds, &ts)
		p.wakeups.Add(1)
		rs.woke(err != nil || fds[0].Revents != 0)
		if pl.timed && ready == 0 && err == nil {
			now := p.clock.Now()
			wk.timedOut(pl, now)
			if now < pl.due {
				now = p.spinUntil(pl.due)
			}
			late := lateness(pl.due, now)
			p.timerWakeups.Add(1)
			p.lateSum.Add(late)
			if late > p.lateMax.Load() {
				p.lateMax.Store(late)
			}
		}
		if err != nil && err != unix.EINTR {
			p.err = fmt.Errorf("forward %s: ppoll: %w", p.name, err)
			return
		}
		if fds[1].Revents != 0 {
			unix.Read(p.wake, evbuf[:])
			if p.stop.Load() {
				return
			}
			p.mu.Lock()
			next, pool, done := p.pending, p.pendingPool, p.swapped
			p.pending, p.pendingPool, p.swapped = nil, nil, nil
			marks := p.marks
			p.marks = nil
			p.mu.Unlock()
			if next != nil {
				link.Flush()
				link = next
				if pool != nil {
					p.pool = pool
				}
				p.link.Store(next)
				close(done)
			}
			if marks != nil {
				marks <- p.mark(link) // buffered: never blocks
			}
		}
	}
}

// System calls of the forwarding threads. They are made without telling
// the Go scheduler (RawSyscall): the thread keeps its P while it sleeps in
// ppoll, which spares the scheduler hand-off on every wake-up (a P is
// reserved per thread, see reserveProcs). When the runtime needs the thread
// (a stop-the-world, or sysmon after 10 ms), its preemption signal
// interrupts ppoll (EINTR) and the loop reaches a safe point at once; the
// device reads and writes never block (O_NONBLOCK).

func ppoll(fds []unix.PollFd, timeout *unix.Timespec) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(timeout)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawRead(fd int, b []byte) (int, error) { return rawIO(unix.SYS_READ, fd, b) }

func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return rawIO(unix.SYS_WRITE, fd, b)
}

// rawIO makes the read or write system call trap on fd with the non-empty
// buffer b, again after EINTR.
func rawIO(trap uintptr, fd int, b []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// maxSleep bounds each ppoll, so that the runtime never waits longer than
// this for a forwarding thread even with asynchronous preemption off.
const maxSleep = int64(10 * time.Millisecond)

// maxAdvance bounds the early wake-up (and so the spinning) per deadline.
const maxAdvance = int64(100 * time.Microsecond)

// spinUntil busy-waits until deadline d (at most maxAdvance after an early
// wake-up) and returns the time.
func (p *path) spinUntil(d emu.Time) emu.Time {
	for {
		if now := p.clock.Now(); now >= d {
			return now
		}
	}
}

// ioPlain moves one IP packet per read and write.
type ioPlain struct {
	scratch [2048]byte // reads while the pool is empty
}

func (io *ioPlain) deliver(p *path, link *pipeline.Pipeline) {
	now := p.clock.Now()
	for pkt := link.Dequeue(now); pkt != nil; pkt = link.Dequeue(now) {
		if _, err := rawWrite(p.to.Fd(), pkt.Data); err != nil {
			p.writeErrors.Add(1)
		} else {
			p.writes.Add(1)
		}
		p.pool.Put(pkt)
	}
}

// receive reads one packet into the pipeline; false when none waits.
func (io *ioPlain) receive(p *path, link *pipeline.Pipeline) bool {
	pkt := p.pool.Get()
	if pkt == nil {
		if _, err := rawRead(p.from.Fd(), io.scratch[:]); err != nil {
			return p.readFailed(err)
		}
		p.reads.Add(1)
		p.poolEmpty.Add(1)
		return true
	}
	k, err := rawRead(p.from.Fd(), pkt.Data[:cap(pkt.Data)])
	if err != nil {
		p.pool.Put(pkt)
		return p.readFailed(err)
	}
	p.reads.Add(1)
	pkt.Data = pkt.Data[:k]
	if link.TooBig(k) {
		p.answerTooBig(link, pkt.Data)
	}
	link.Enqueue(p.clock.Now(), pkt)
	return true
}

// answerTooBig answers orig, a packet the link drops for exceeding its MTU,
// when the link's mode asks for it: an ICMP fragmentation needed
// (fragNeeded) written into the path's input device, behind a zero
// virtio_net_hdr when the device has one. It runs on the path's thread.
func (p *path) answerTooBig(link *pipeline.Pipeline, orig []byte) {
	mtu, mode := link.MTU()
	if mode != spec.MTUICMP {
		return
	}
	h := 0
	if p.from.VnetHdr() {
		h = offload.VirtioNetHdrLen
	}
	clear(p.icmp[:h])
	n := fragNeeded(p.icmp[h:], orig, mtu, p.router)
	if n == 0 {
		p.tooBigSilent.Add(1)
		return
	}
	if _, err := rawWrite(p.from.Fd(), p.icmp[:h+n]); err != nil {
		p.writeErrors.Add(1)
		return
	}
	p.fragNeeded.Add(1)
	if p.tap != nil {
		now := p.clock.Now()
		p.tap.put(KindICMP, pipeline.Delivered, 0, now, now, 0, p.icmp[h:h+n])
	}
}

func (p *path) readFailed(err error) bool {
	if err != tun.ErrWouldBlock {
		p.readErrors.Add(1)
	} else {
		p.emptyReads.Add(1)
	}
	return false
}

// Offload I/O sizes.
const (
	maxSuper   = offload.VirtioNetHdrLen + 65535 // one read
	maxSegs    = 128                             // pool buffers taken per segmentation batch (a 64 KB super-packet with a 536-byte MSS fits in one)
	outBatch   = 256                             // packets coalesced per write round
	arenaBytes = outBatch * (offload.VirtioNetHdrLen + 1600)
)

// ioVnet moves super-packets with a virtio_net_hdr in front.
type ioVnet struct {
	in      []byte
	segs    [maxSegs]*emu.Packet
	bufs    [maxSegs][]byte
	sizes   [maxSegs]int
	due     [outBatch]*emu.Packet
	data    [outBatch][]byte
	outs    [outBatch][]byte
	arena   []byte
	co      offload.Coalescer
	zeroHdr [offload.VirtioNetHdrLen]byte
	iov     [2]unix.Iovec
}

// writev writes a zero virtio_net_hdr and pkt in one system call.
func (io *ioVnet) writev(fd int, pkt []byte) error {
	if len(pkt) == 0 {
		return unix.EINVAL
	}
	io.iov[0].Base, io.iov[0].Len = &io.zeroHdr[0], offload.VirtioNetHdrLen
	io.iov[1].Base = &pkt[0]
	io.iov[1].SetLen(len(pkt))
	for {
		_, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&io.iov[0])), 2)
		if e == unix.EINTR {
			continue
		}
		io.iov[1].Base = nil
		if e != 0 {
			return e
		}
		return nil
	}
}

func newIOVnet() *ioVnet {
	return &ioVnet{in: make([]byte, maxSuper), arena: make([]byte, arenaBytes)}
}

// deliver writes every due packet, merging those of a flow that leave
// together.
func (io *ioVnet) deliver(p *path, link *pipeline.Pipeline) {
	for {
		now := p.clock.Now()
		n := 0
		for n < outBatch {
			pkt := link.Dequeue(now)
			if pkt == nil {
				break
			}
			io.due[n], io.data[n] = pkt, pkt.Data
			n++
		}
		if n == 0 {
			return
		}
		if n == 1 {
			// Nothing to merge (the common case behind a rate limit): send
			// it as a plain wire packet behind a zero header, without a copy.
			if err := io.writev(p.to.Fd(), io.data[0]); err != nil {
				p.writeErrors.Add(1)
			} else {
				p.writes.Add(1)
			}
			p.pool.Put(io.due[0])
			io.due[0], io.data[0] = nil, nil
			return
		}
		k, err := io.co.Coalesce(io.data[:n], io.arena, io.outs[:])
		if err != nil { // cannot happen with these buffer sizes; send one by one
			k = 0
			for i := 0; i < n; i++ {
				b := io.arena[:offload.VirtioNetHdrLen+len(io.data[i])]
				clear(b[:offload.VirtioNetHdrLen])
				copy(b[offload.VirtioNetHdrLen:], io.data[i])
				io.write(p, b)
			}
		}
		for i := 0; i < k; i++ {
			io.write(p, io.outs[i])
		}
		for i := 0; i < n; i++ {
			p.pool.Put(io.due[i])
			io.due[i], io.data[i] = nil, nil
		}
		if n < outBatch {
			return
		}
	}
}

func (io *ioVnet) write(p *path, b []byte) {
	if _, err := rawWrite(p.to.Fd(), b); err != nil {
		p.writeErrors.Add(1)
	} else {
		p.writes.Add(1)
	}
}

// receive reads one (super-)packet and enqueues its wire packets; false
// when none waits.
func (io *ioVnet) receive(p *path, link *pipeline.Pipeline) bool {
	m, err := rawRead(p.from.Fd(), io.in)
	if err != nil {
		return p.readFailed(err)
	}
	p.reads.Add(1)
	var hdr offload.VirtioNetHdr
	if hdr.Decode(io.in[:m]) != nil {
		p.malformed.Add(1)
		return true
	}
	pkt := io.in[offload.VirtioNetHdrLen:m]
	if link.Transparent() {
		// Nothing to impair: the super-packet goes on as it was read, with
		// its header (GSO, partial checksum), and is counted per wire
		// packet. Cutting it up and merging it again would only cost CPU.
		if n, b, err := offload.WireSize(hdr, pkt); err == nil {
			if p.tap != nil {
				p.tap.superPacket(hdr, pkt, p.clock.Now())
			}
			io.write(p, io.in[:m])
			link.Pass(uint64(n), uint64(b))
			return true
		}
	}
	io.segment(p, link, hdr, pkt, p.clock.Now())
	return true
}

// segment enqueues the wire packets of super-packet pkt at now, cutting it
// in batches of up to maxSegs pool buffers: a super-packet of any number of
// segments goes through whole when the pool has the buffers. When the pool
// runs dry, the segments that got a buffer still go through and only the
// rest are dropped (PoolEmpty, per wire packet); a super-packet is never
// dropped as one unit unless it is malformed.
func (io *ioVnet) segment(p *path, link *pipeline.Pipeline, hdr offload.VirtioNetHdr, pkt []byte, now emu.Time) {
	first, total := 0, -1 // total is known after the first SegmentFrom
	for total < 0 || first < total {
		want := 1
		switch {
		case total >= 0:
			want = total - first
		case hdr.GSOType != offload.GSONone && hdr.GSOSize > 0:
			want = len(pkt)/int(hdr.GSOSize) + 1 // at least the segment count
		}
		want = min(want, maxSegs)
		got := 0
		for got < want {
			s := p.pool.Get()
			if s == nil {
				break
			}
			io.segs[got], io.bufs[got] = s, s.Data[:cap(s.Data)]
			got++
		}
		n, tot, err := offload.SegmentFrom(hdr, pkt, first, io.bufs[:got], io.sizes[:got])
		for i := 0; i < got; i++ {
			s := io.segs[i]
			io.segs[i], io.bufs[i] = nil, nil
			if i < n {
				s.Data = s.Data[:io.sizes[i]]
				if link.TooBig(len(s.Data)) {
					p.answerTooBig(link, s.Data)
				}
				link.Enqueue(now, s)
			} else {
				p.pool.Put(s)
			}
		}
		switch {
		case err == nil && n > 0:
			first, total = first+n, tot
		case err == nil: // no buffer left
			p.poolEmpty.Add(uint64(tot - first))
			return
		case errors.Is(err, offload.ErrShortBuffer): // buffers smaller than a segment
			p.oversize.Add(uint64(max(tot-first, 1)))
			return
		default:
			p.malformed.Add(1)
			return
		}
	}
}

// preciseThread locks the calling goroutine to its OS thread, pins it to
// cpus when there are any, and sets the thread up for precise sleeps: 1 ns timer slack, so that ppoll wakes when
// asked rather than up to 50 us later, and with realtime SCHED_FIFO at
// RealtimePriority when the process may. It returns whether SCHED_FIFO was
// granted; release, which restores the default slack and policy and gives
// the thread back (a thread that cannot be restored stays locked, so the
// runtime ends it with its goroutine); and the error of setting the slack
// (the thread is still usable, less precisely).
func preciseThread(realtime bool, cpus []int) (rt bool, release func(), slackErr error) {
	runtime.LockOSThread()
	slackErr = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	var saved unix.CPUSet
	pinned := false
	if len(cpus) > 0 && unix.SchedGetaffinity(0, &saved) == nil {
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			slackErr = errors.Join(slackErr, fmt.Errorf("sched_setaffinity %v: %w", cpus, err))
		} else {
			pinned = true
		}
	}
	rt = realtime && setFIFO(RealtimePriority) == nil
	return rt, func() {
		clean := unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) == nil
		if rt {
			clean = clean && setNormal() == nil
		}
		if pinned {
			clean = clean && unix.SchedSetaffinity(0, &saved) == nil
		}
		if clean {
			runtime.UnlockOSThread()
		}
	}, slackErr
}

// setFIFO puts the calling thread under SCHED_FIFO at priority prio.
func setFIFO(prio int) error {
	param := struct{ prio int32 }{int32(prio)}
	_, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, uintptr(unix.SCHED_FIFO), uintptr(unsafe.Pointer(&param)))
	if e != 0 {
		return e
	}
	return nil
}

// threadCPU returns the calling thread's CPU time in ns (0 if the clock
// cannot be read). A raw system call, like the thread's others: the vDSO
// does not serve CPU-time clocks.
func threadCPU() int64 {
	var ts unix.Timespec
	_, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_THREAD_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	if e != 0 {
		return 0
	}
	return ts.Nano()
}

// setNormal returns the calling thread to SCHED_OTHER.
func setNormal() error {
	param := struct{ prio int32 }{0}
	_, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, 0 /* SCHED_OTHER */, uintptr(unsafe.Pointer(&param)))
	if e != 0 {
		return e
	}
	return nil
}

// GOMAXPROCS: a forwarder thread returning from ppoll needs a P to run on
// at once; with every P busy it would wait for the scheduler (milliseconds).
// While forwarders run, GOMAXPROCS is raised by one per thread above what it
// was, and at least to threads+2 (see DESIGN.md); it is restored when the
// last one stops.
var procs struct {
	sync.Mutex
	threads int
	base    int
}

func reserveProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	if procs.threads == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.threads += n
	runtime.GOMAXPROCS(max(procs.base, 2) + procs.threads)
}

func releaseProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	procs.threads -= n
	if procs.threads == 0 {
		runtime.GOMAXPROCS(procs.base)
	} else {
		runtime.GOMAXPROCS(max(procs.base, 2) + procs.threads)
	}
}

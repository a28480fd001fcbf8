package calibrate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/netns"
)

// Calibration traffic: UDP datagrams whose payload starts with a header
// carrying the kind of packet, the phase it belongs to, its sequence number
// within its flow and the CLOCK_MONOTONIC time at which it was handed to the
// kernel.
//
//	0..3   "QBCP"
//	4      kind: 1 probe, 2 load, 3 bulk (rate and CPU flows)
//	5      phase
//	6..7   zero
//	8..15  sequence number (big-endian)
//	16..23 send time, CLOCK_MONOTONIC ns (big-endian)
const (
	kindProbe byte = 1
	kindLoad  byte = 2
	kindBulk  byte = 3

	headerLen = 24
	// probePayload is a probe's UDP payload: a 92-byte IP packet.
	probePayload = 64
	// bulkPayload is the UDP payload of load and bulk packets: a 1500-byte
	// IP packet, one full MTU.
	bulkPayload = 1472
	// ipUDPOverhead is the IPv4 and UDP header bytes around a payload.
	ipUDPOverhead = 28
	// gsoSegments is the most segments one UDP GSO write carries
	// (44 * 1472 bytes fit in the 64 KiB a datagram may hold).
	gsoSegments = 44
)

var magic = [4]byte{'Q', 'B', 'C', 'P'}

func putHeader(b []byte, kind, phase byte, seq uint64, t int64) {
	copy(b, magic[:])
	b[4], b[5], b[6], b[7] = kind, phase, 0, 0
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], uint64(t))
}

func parseHeader(b []byte) (kind, phase byte, seq uint64, t int64, ok bool) {
	if len(b) < headerLen || [4]byte(b[:4]) != magic {
		return 0, 0, 0, 0, false
	}
	return b[4], b[5], binary.BigEndian.Uint64(b[8:]), int64(binary.BigEndian.Uint64(b[16:])), true
}

// monoNow reads CLOCK_MONOTONIC (the clock of the emulator's pipelines).
var monoNow = func() int64 { return int64(emu.MonotonicClock().Now()) }

// realtimeOffset returns CLOCK_REALTIME - CLOCK_MONOTONIC in ns: kernel
// receive timestamps (SO_TIMESTAMPNS) are on the realtime clock, send
// timestamps on the monotonic one. The two only drift apart when the clock
// is stepped (NTP slewing changes both rates alike), which Run checks by
// reading the offset before and after each phase. The reading is bracketed
// by two monotonic readings; the tightest of a few brackets wins, so its
// error is at most half of that bracket (well under a microsecond).
func realtimeOffset() int64 {
	best, off := int64(1<<62), int64(0)
	for range 8 {
		var a, r, b unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if w := b.Nano() - a.Nano(); w < best {
			best, off = w, r.Nano()-(a.Nano()+w/2)
		}
	}
	return off
}

// probeRx is what arrived of one probe.
type probeRx struct {
	rx     int64 // receive time of the first copy (CLOCK_MONOTONIC ns); 0: none
	copies uint32
}

// collector gathers one phase's packets of one direction.
type collector struct {
	phase  byte
	offset int64 // CLOCK_REALTIME - CLOCK_MONOTONIC at the phase start

	probes []probeRx // indexed by sequence number
	maxSeq int64     // highest probe sequence number received so far
	late   int       // probes received after a higher-numbered one (RFC 4737)

	bulkPackets   int64
	bulkBytes     int64 // IP bytes of load and bulk packets
	bulkFirst     int64 // receive time of the first one (mono ns)
	bulkFirstSize int64
	bulkLast      int64

	stray   int64 // calibration packets of another phase or out of range
	noStamp int64 // datagrams without a kernel timestamp
}

func newCollector(phase byte, probes int, offset int64) *collector {
	return &collector{phase: phase, offset: offset, probes: make([]probeRx, probes), maxSeq: -1}
}

// add records one datagram received at rx (CLOCK_MONOTONIC ns).
func (c *collector) add(payload []byte, rx int64) {
	kind, phase, seq, _, ok := parseHeader(payload)
	if !ok || phase != c.phase {
		c.stray++
		return
	}
	switch kind {
	case kindProbe:
		if seq >= uint64(len(c.probes)) {
			c.stray++
			return
		}
		p := &c.probes[seq]
		if p.copies == 0 {
			p.rx = rx
		}
		p.copies++
		if p.copies == 1 {
			if int64(seq) < c.maxSeq {
				c.late++
			} else {
				c.maxSeq = int64(seq)
			}
		}
	case kindLoad, kindBulk:
		size := int64(len(payload) + ipUDPOverhead)
		if c.bulkPackets == 0 {
			c.bulkFirst, c.bulkFirstSize = rx, size
		}
		c.bulkPackets++
		c.bulkBytes += size
		c.bulkLast = rx
	default:
		c.stray++
	}
}

// receiver is a UDP socket, in the namespace of one end, that timestamps
// every datagram in the kernel (SO_TIMESTAMPNS: the time the packet entered
// the receiving stack, written by the emulator to the TUN device or by the
// veth peer) and reports its own overflow drops (SO_RXQ_OVFL).
type receiver struct {
	conn *net.UDPConn
	pc   *ipv4.PacketConn
	addr netip.AddrPort
	msgs []ipv4.Message
	ovfl uint32 // socket drops so far (SO_RXQ_OVFL)
}

const (
	recvBatch  = 64
	recvBuffer = 32 << 20
)

// doer is an environment of two namespaces: the testbed or the veth pair.
type doer interface {
	// Do runs fn on a locked OS thread inside side s's namespace.
	Do(s netns.Side, fn func() error) error
	// Command returns a command running name inside side s's namespace,
	// killed when this process dies (see netns.Testbed.Command).
	Command(ctx context.Context, s netns.Side, name string, arg ...string) *exec.Cmd
	Addr(s netns.Side) netip.Addr
}

func newReceiver(e doer, s netns.Side) (*receiver, error) {
	r := &receiver{}
	err := e.Do(s, func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.Addr(s), 0)))
		if err != nil {
			return err
		}
		r.conn = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s receiver: %w", s, err)
	}
	r.addr = r.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	rc, err := r.conn.SyscallConn()
	if err != nil {
		r.conn.Close()
		return nil, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); serr != nil {
			serr = fmt.Errorf("SO_TIMESTAMPNS: %w", serr)
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
			serr = fmt.Errorf("SO_RXQ_OVFL: %w", serr)
			return
		}
		// Accept coalesced datagrams (as QUIC stacks do): the kernel then
		// need not cut the emulator's merged writes back into datagrams.
		// Without UDP_GRO (old kernels) each arrives on its own.
		_ = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
		// SO_RCVBUFFORCE needs CAP_NET_ADMIN in the initial namespace;
		// rootless runs fall back to what rmem_max allows (and then
		// report any overflow).
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, recvBuffer) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, recvBuffer)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		r.conn.Close()
		return nil, fmt.Errorf("%s receiver: %w", s, err)
	}
	r.pc = ipv4.NewPacketConn(r.conn)
	r.msgs = make([]ipv4.Message, recvBatch)
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{make([]byte, 65536)}
		r.msgs[i].OOB = make([]byte, 128)
	}
	return r, nil
}

func (r *receiver) Close() error { return r.conn.Close() }

// run reads into c until stop is closed, then drains what is already
// queued (reads until 30 ms pass without a datagram) and returns.
func (r *receiver) run(c *collector, stop <-chan struct{}) error {
	stopping := false
	for {
		if !stopping {
			select {
			case <-stop:
				stopping = true
			default:
			}
		}
		wait := 100 * time.Millisecond
		if stopping {
			wait = 30 * time.Millisecond
		}
		_ = r.conn.SetReadDeadline(time.Now().Add(wait))
		n, err := r.pc.ReadBatch(r.msgs, 0)
		for i := 0; i < n; i++ {
			m := &r.msgs[i]
			rx, ok, ovfl, gso := parseCmsgs(m.OOB[:m.NN])
			if ovfl > r.ovfl {
				r.ovfl = ovfl
			}
			if !ok {
				c.noStamp++
				continue
			}
			b := m.Buffers[0][:m.N]
			if gso <= 0 {
				gso = len(b)
			}
			for len(b) > 0 { // one coalesced datagram: gso-byte segments
				seg := b[:min(gso, len(b))]
				c.add(seg, rx-c.offset)
				b = b[len(seg):]
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if stopping {
					return nil
				}
				continue
			}
			return err
		}
	}
}

// parseCmsgs extracts the SO_TIMESTAMPNS receive time (CLOCK_REALTIME ns),
// the SO_RXQ_OVFL drop counter and the UDP_GRO segment size (0: a single
// datagram) from a control message buffer.
func parseCmsgs(b []byte) (rx int64, ok bool, ovfl uint32, gso int) {
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			break
		}
		data := b[unix.CmsgLen(0):l]
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4 {
			gso = int(int32(binary.NativeEndian.Uint32(data)))
		}
		if h.Level == unix.SOL_SOCKET {
			switch h.Type {
			case unix.SCM_TIMESTAMPNS:
				if len(data) >= 16 {
					sec := int64(binary.NativeEndian.Uint64(data[0:]))
					nsec := int64(binary.NativeEndian.Uint64(data[8:]))
					rx, ok = sec*1e9+nsec, true
				}
			case unix.SO_RXQ_OVFL:
				if len(data) >= 4 {
					ovfl = binary.NativeEndian.Uint32(data)
				}
			}
		}
		sp := unix.CmsgSpace(l - unix.CmsgLen(0))
		if sp >= len(b) {
			break
		}
		b = b[sp:]
	}
	return rx, ok, ovfl, gso
}

// sender is a blocking UDP socket, created in one end's namespace and
// connected to a receiver at the other end, driven by the send loop.
type sender struct {
	fd  int
	gso bool
}

func newSender(e doer, s netns.Side, dst netip.AddrPort, gso bool) (*sender, error) {
	var fd int
	err := e.Do(s, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		local := e.Addr(s).As4()
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: local}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind %s: %w", e.Addr(s), err)
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("connect %s: %w", dst, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s sender: %w", s, err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	if gso {
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, bulkPayload); err != nil {
			gso = false // an old kernel: one datagram per write
		}
	}
	return &sender{fd: fd, gso: gso}, nil
}

func (s *sender) Close() error { return unix.Close(s.fd) }

// sendRec is one packet handed to the kernel, for the model replay.
type sendRec struct {
	t     int64 // send time (mono ns)
	size  int32 // IP packet bytes
	probe int32 // probe sequence number, -1 for load
}

// flow is one stream of calibration packets in the send loop: probes at a
// fixed spacing, or bulk packets at a byte rate.
type flow struct {
	tx    *sender
	kind  byte
	phase byte
	recs  *[]sendRec // nil: not recorded

	// probes
	interval int64
	count    int

	// load and bulk: IP bytes per second from start until end
	bytesPerSec float64
	start, end  int64
	tick        int64

	cancel  atomic.Bool // set to end the flow early
	next    int64
	seq     uint64
	sent    int64 // packets
	sentIP  float64
	errs    int64
	lastErr error
	buf     []byte
}

func newProbeFlow(tx *sender, phase byte, count int, interval time.Duration, recs *[]sendRec) *flow {
	return &flow{tx: tx, kind: kindProbe, phase: phase, count: count, interval: int64(interval), recs: recs,
		buf: make([]byte, probePayload)}
}

// newBulkFlow sends 1500-byte IP packets at bitsPerSec (IP bytes) for d.
func newBulkFlow(tx *sender, kind, phase byte, bitsPerSec float64, d time.Duration, recs *[]sendRec) *flow {
	f := &flow{tx: tx, kind: kind, phase: phase, bytesPerSec: bitsPerSec / 8, end: int64(d), recs: recs,
		buf: make([]byte, gsoSegments*bulkPayload)}
	// Wake often enough for smooth traffic, but with at least one packet
	// per wake-up.
	f.tick = max(int64(250*time.Microsecond), int64(float64(bulkPayload+ipUDPOverhead)/f.bytesPerSec*1e9))
	return f
}

func (f *flow) done() bool {
	if f.cancel.Load() {
		return true
	}
	if f.kind == kindProbe {
		return f.count == 0
	}
	return f.start != 0 && f.next >= f.end
}

// begin schedules the flow's first packet at t0.
func (f *flow) begin(t0 int64) {
	f.next = t0
	if f.kind != kindProbe {
		f.start = t0
		f.end += t0
	}
}

// fire sends what is due at now.
func (f *flow) fire(now int64) {
	if f.kind == kindProbe {
		t := monoNow()
		putHeader(f.buf, kindProbe, f.phase, f.seq, t)
		if f.write(f.buf, 1) && f.recs != nil {
			*f.recs = append(*f.recs, sendRec{t: t, size: probePayload + ipUDPOverhead, probe: int32(f.seq)})
		}
		f.seq++
		f.count--
		f.next += f.interval
		if f.next < now {
			f.next = now + f.interval // fell behind (preempted): keep the spacing, skip no probe
		}
		return
	}
	const size = bulkPayload + ipUDPOverhead
	due := f.bytesPerSec*float64(min(now, f.end)-f.start)/1e9 - f.sentIP
	n := int(due / size)
	for n > 0 {
		k := 1
		if f.tx.gso {
			k = min(n, gsoSegments)
		}
		t := monoNow()
		for i := 0; i < k; i++ {
			putHeader(f.buf[i*bulkPayload:], f.kind, f.phase, f.seq+uint64(i), t)
		}
		f.seq += uint64(k)
		if f.write(f.buf[:k*bulkPayload], k) && f.recs != nil {
			for range k {
				*f.recs = append(*f.recs, sendRec{t: t, size: size, probe: -1})
			}
		}
		f.sentIP += float64(k * size)
		n -= k
	}
	f.next = now + f.tick
}

// write sends b (packets datagrams) and reports whether it went out.
func (f *flow) write(b []byte, packets int) bool {
	for {
		_, err := unix.Write(f.tx.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// ENOBUFS and the like: the packets never reached the link.
			f.errs += int64(packets)
			f.lastErr = err
			return false
		}
		f.sent += int64(packets)
		return true
	}
}

// procsMu serializes the GOMAXPROCS adjustment of concurrent send loops.
var procsMu sync.Mutex

// runFlows runs the send loop on a dedicated OS thread with 1 ns timer
// slack, sleeping with clock_nanosleep(TIMER_ABSTIME) until the next packet
// is due, so that probes leave evenly spaced. The loop holds its thread
// while it sleeps, so GOMAXPROCS is raised by one meanwhile (otherwise the
// receivers could wait for a processor; see DESIGN.md).
func runFlows(flows []*flow) {
	procsMu.Lock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	procsMu.Unlock()
	defer func() {
		procsMu.Lock()
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) - 1)
		procsMu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// A thread with a changed timer slack is not returned to the
		// runtime's pool: it exits with this goroutine.
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		t0 := monoNow() + int64(time.Millisecond)
		for _, f := range flows {
			f.begin(t0)
		}
		for {
			next := int64(-1)
			for _, f := range flows {
				if !f.done() && (next < 0 || f.next < next) {
					next = f.next
				}
			}
			if next < 0 {
				return
			}
			now := monoNow()
			if next > now {
				ts := unix.NsecToTimespec(next)
				for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
				}
				now = monoNow()
			}
			for _, f := range flows {
				if !f.done() && f.next <= now {
					f.fire(now)
				}
			}
		}
	}()
	<-done
}

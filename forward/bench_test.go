package forward_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
	"golang.org/x/sys/unix"
)

func benchTestbed(b *testing.B, up, down string, mods ...func(*netns.Config)) *netns.Testbed {
	b.Helper()
	if os.Geteuid() != 0 {
		testsupport.Unavailable(b, "needs root")
	}
	u, err := spec.Parse(up)
	if err != nil {
		b.Fatal(err)
	}
	d, err := spec.Parse(down)
	if err != nil {
		b.Fatal(err)
	}
	cfg := netns.Config{Up: u, Down: d, Seed: 1}
	for _, m := range mods {
		m(&cfg)
	}
	tb, err := netns.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tb.Close() })
	return tb
}

// BenchmarkTCPThroughput measures kernel TCP (Cubic) bulk goodput from the
// client namespace to the server namespace through the emulator. One
// iteration moves 1 MiB; run with e.g. -benchtime=3000x.
func BenchmarkTCPThroughput(b *testing.B) {
	for _, c := range []struct {
		name, link string
		mod        func(*netns.Config)
	}{
		{"offload/none", "", func(*netns.Config) {}},
		{"offload/delay10ms", "delay 10ms", func(*netns.Config) {}},
		{"plain/none", "", func(c *netns.Config) { c.NoOffload = true }},
		{"plain/delay10ms", "delay 10ms", func(c *netns.Config) { c.NoOffload = true }},
		{"offload-nort/delay10ms", "delay 10ms", func(c *netns.Config) { c.NoRealtime = true }},
		{"offload/rate100mbit-delay10ms", "delay 10ms rate 100mbit", func(*netns.Config) {}},
		{"offload-noadvance/rate100mbit-delay10ms", "delay 10ms rate 100mbit", func(c *netns.Config) { c.NoTimerAdvance = true }},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb := benchTestbed(b, c.link, c.link, c.mod)
			cc := netns.CCControl("cubic")
			var ln net.Listener
			if err := tb.Do(netns.Server, func() (err error) {
				ln, err = (&net.ListenConfig{Control: cc}).Listen(context.Background(), "tcp4",
					netip.AddrPortFrom(tb.Addr(netns.Server), 0).String())
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			received := make(chan int64, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					received <- -1
					return
				}
				n, _ := io.Copy(io.Discard, conn)
				conn.Close()
				received <- n
			}()
			var conn net.Conn
			if err := tb.Do(netns.Client, func() (err error) {
				conn, err = (&net.Dialer{Control: cc}).Dial("tcp4", ln.Addr().String())
				return err
			}); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 1<<20)
			// Warm up: leave slow start behind.
			for end := time.Now().Add(time.Second); time.Now().Before(end); {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := tb.ForwarderCPU()
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start)
			b.StopTimer()
			cpu := tb.ForwarderCPU() - cpu0
			conn.Close()
			<-received
			gbps := float64(b.N) * float64(len(buf)) * 8 / el.Seconds() / 1e9
			b.ReportMetric(gbps, "Gbit/s")
			b.ReportMetric(100*cpu.Seconds()/el.Seconds(), "fwd-cpu-%")
			up, down := tb.Counters()
			us, ds := tb.ForwarderStats()
			if du, dd, err := tb.DeviceDrops(); err == nil && du+dd > 0 {
				b.Logf("kernel dropped %d (client device) and %d (server device) packets before the emulator", du, dd)
			}
			b.Logf("%s: %.2f Gbit/s over %v; forwarder CPU %.0f%% of one core; up %d pkts (%d queue drops), down %d pkts; stats up %+v down %+v",
				c.name, gbps, el.Round(time.Millisecond), 100*cpu.Seconds()/el.Seconds(), up.PacketsOut, up.DropQueue, down.PacketsOut, us, ds)
		})
	}
}

// BenchmarkOneWayDelay measures the one-way delay of UDP probes across a
// "delay 25ms" link: the sender stamps CLOCK_REALTIME into the payload, the
// receiving kernel stamps the arrival (SO_TIMESTAMPNS), both in one host.
// One iteration is one probe, 1 ms apart; reports the error against 25 ms at
// p50, p99 and max, idle and next to 100 Mbit/s of other UDP traffic.
func BenchmarkOneWayDelay(b *testing.B) {
	for _, c := range []struct {
		load    int
		rt, adv bool
	}{{0, true, true}, {100, true, true}, {0, true, false}, {100, true, false}, {0, false, false}, {100, false, false}} {
		load := c.load
		b.Run(fmt.Sprintf("load%dmbit/realtime=%v/advance=%v", c.load, c.rt, c.adv), func(b *testing.B) {
			const delay = 25 * time.Millisecond
			tb := benchTestbed(b, "delay 25ms", "", func(cfg *netns.Config) { cfg.NoRealtime, cfg.NoTimerAdvance = !c.rt, !c.adv })
			cpu0 := tb.ForwarderCPU()
			var rx, tx, blast *net.UDPConn
			srvAddr := netip.AddrPortFrom(tb.Addr(netns.Server), 0)
			if err := tb.Do(netns.Server, func() (err error) {
				rx, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(srvAddr))
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			if err := tb.Do(netns.Client, func() (err error) {
				if tx, err = net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr)); err != nil {
					return err
				}
				blast, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: tb.Addr(netns.Server).AsSlice(), Port: 9})
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			defer blast.Close()
			raw, _ := rx.SyscallConn()
			raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
			rx.SetReadBuffer(8 << 20)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			if load > 0 {
				// Background traffic at load Mbit/s in 1400-byte datagrams,
				// paced in 1 ms rounds, to a port nobody listens on.
				wg.Add(1)
				go func() {
					defer wg.Done()
					pkt := make([]byte, 1400)
					perMs := load * 1e6 / 8 / 1400 / 1000
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							for i := 0; i < perMs; i++ {
								blast.Write(pkt)
							}
						}
					}
				}()
			}
			errs := make([]time.Duration, 0, b.N)
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 64)
				oob := make([]byte, 128)
				for len(errs) < b.N {
					rx.SetReadDeadline(time.Now().Add(2 * time.Second))
					n, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
					if err != nil {
						return
					}
					if n < 8 {
						continue
					}
					sent := int64(binary.LittleEndian.Uint64(buf))
					msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
					if err != nil {
						continue
					}
					for _, m := range msgs {
						if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS {
							ts := *(*unix.Timespec)(unsafePointer(m.Data))
							errs = append(errs, time.Duration(ts.Nano()-sent)-delay)
						}
					}
				}
			}()
			b.ResetTimer()
			msg := make([]byte, 64)
			for i := 0; i < b.N; i++ {
				binary.LittleEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
				tx.Write(msg)
				time.Sleep(time.Millisecond)
			}
			<-done
			b.StopTimer()
			close(stop)
			wg.Wait()
			if len(errs) == 0 {
				b.Fatal("no probe arrived")
			}
			slices.Sort(errs)
			p := func(q float64) time.Duration { return errs[int(q*float64(len(errs)-1))] }
			b.ReportMetric(float64(p(0.5).Microseconds()), "p50-err-us")
			b.ReportMetric(float64(p(0.99).Microseconds()), "p99-err-us")
			b.ReportMetric(float64(errs[len(errs)-1].Microseconds()), "max-err-us")
			b.ReportMetric(float64(errs[0].Microseconds()), "min-err-us")
			b.ReportMetric(100*(tb.ForwarderCPU()-cpu0).Seconds()/b.Elapsed().Seconds(), "fwd-cpu-%")
			st, _ := tb.ForwarderStats()
			if st.TimerWakeups > 0 {
				b.Logf("forwarder timer wake-ups %d, lateness mean %v max %v", st.TimerWakeups,
					time.Duration(st.LateSumNs/st.TimerWakeups), time.Duration(st.LateMaxNs))
				b.ReportMetric(float64(st.LateSumNs/st.TimerWakeups)/1e3, "timer-late-mean-us")
			}
			b.Logf("load %d Mbit/s: %d probes, one-way delay error vs 25ms: min %v p50 %v p99 %v max %v",
				load, len(errs), errs[0], p(0.5), p(0.99), errs[len(errs)-1])
		})
	}
}

// Package calibrate measures what quicbench's emulated link really does, with
// traffic it generates itself between the two namespaces of a testbed, and
// compares every figure with what the link spec prescribes (`quicbench
// calibrate`).
//
// # Method
//
// Probes are UDP datagrams (92-byte IP packets) carrying a sequence number
// and their CLOCK_MONOTONIC send time, sent in both directions at once,
// evenly spaced by a send loop on a dedicated OS thread that sleeps with
// clock_nanosleep(TIMER_ABSTIME) and 1 ns timer slack. The send time is read
// right before the send system call. The receiver has the kernel timestamp
// every datagram (SO_TIMESTAMPNS): the time the packet entered the receiving
// namespace's stack, i.e. the moment the emulator wrote it to the TUN device,
// independent of when the receiving goroutine is scheduled. Both ends run on
// one host, so one clock serves both: one-way delay = receive time - send
// time. (SO_TIMESTAMPNS stamps CLOCK_REALTIME; it is converted with the
// offset REALTIME - MONOTONIC, read before and after each phase: the offset
// only changes when the clock is stepped, which is reported.)
//
// The measurement's own error is measured in the same run: the same probes
// over a plain veth pair between two throw-away namespaces (no emulator)
// have a one-way delay that is pure measurement overhead (send system call,
// the sending and receiving stacks). Its p50 and p99 are printed as the
// floor; every emulated delay includes it.
//
// What the configured link should do to the probes is not approximated
// from the spec: the emulator's pipeline (package emu/pipeline, whose
// semantics are netem's and are unit-tested with an injected clock) is fed
// the very packets the phase sent, in the same order, at their send times,
// in exact virtual time and with the same seed. It therefore draws the same
// per-packet loss, duplication, corruption, reorder and jitter decisions as
// the real link, and its delivery times are the "configured" delays of
// exactly these probes, serialization behind a rate included. The real link
// differs from it only by its real-time error (reading from and writing to
// the TUN devices, timer wake-ups), which is what calibration is about.
//
// # Phases
//
//  1. floor: probes over the veth pair.
//  2. idle: Packets probes per direction (10,000 per second, or fewer so
//     that probes use at most 20% of a configured rate).
//  3. load: as idle, next to a bulk UDP flow of 1500-byte packets in the
//     same direction at 100 Mbit/s (or half the configured rate, if lower),
//     sent by the same loop so that the order of probes and load packets
//     on the link is known to the model.
//  4. rate (links with a rate or trace): a UDP flow at 110% of the rate for
//     Duration, one direction at a time; the delivered rate is the IP bytes
//     received per second between the first and the last packet, from the
//     kernel timestamps.
//  5. throughput (Config.Throughput): bulk goodput of kernel TCP, TCP+TLS
//     (quicbench's raw protocol over TLS 1.3) and quic-go (the raw protocol
//     over one QUIC stream) from the server to the client through the
//     emulated link and through the veth pair, one after the other, each for
//     Duration, the first fifth of each transfer (slow start) left out; and
//     the emulator's CPU while it carries 100 Mbit/s: paced TCP and single
//     UDP datagrams through an unimpaired link, against the same over the
//     veth pair; unpaced TCP through "rate 100mbit", against the veth pair
//     shaped by the kernel's tbf at the same rate; and paced TCP through the
//     run's own links (no baseline: nothing here delays or drops without
//     the emulator). Each load's cost is the CPU it takes from a soaker, a
//     SCHED_IDLE thread per CPU counting units of arithmetic against its
//     rate on the quiet machine, measured before and after (soak.go): per
//     thread CPU time and the machine's idle counters miss the interrupts
//     and softirqs that deliver packets and fire the kernel shaper's timers,
//     and a virtual machine's exits to its hypervisor. The emulator's own
//     cost is the difference between the emulated path and its baseline
//     (scaled to the same goodput); its forwarding threads' CPU (schedstat)
//     and their system calls and wake-ups per wire packet are shown too.
//     The bulk endpoints are processes of their own inside the namespaces
//     (Config.Exe run as `calibrate-bulk server|client`, see BulkMain), as
//     `quicbench run`'s server and agent are, never goroutines of the
//     process hosting the emulator: its forwarding threads sleep in raw
//     system calls holding their Go Ps, which stalls timer-driven Go code
//     sharing the process (quic-go's pacing and ACK timers) for
//     milliseconds. The client child reports when the measured window
//     starts and ends, which is when the CPU is read; the soaker is
//     `calibrate-bulk soak`.
//
// The pipelines are rebuilt (Testbed.SetLink, same seed) at the start of
// every phase, so each phase's decisions start from the first packet, as
// the model's do.
//
// # Figures and tolerances
//
// Per direction:
//
//   - delay p50 and p99 (idle and under load): within 50 us and 150 us of
//     the model's (for `delay 25ms`: 25 ms); the fidelity target.
//   - delay max: shown, not judged (one late wake-up in 20,000 is not a
//     calibration failure, but it is worth seeing).
//   - jitter: the mean absolute difference of consecutive probes' one-way
//     delays (RFC 5481's IPDV), within 50 us of the model's. The standard
//     deviation is shown too, not judged: one stalled millisecond among
//     20,000 probes inflates it, while IPDV measures the jitter a flow sees.
//   - per-packet error p50/p99: measured minus model delay of each probe,
//     shown when the real link and the model delivered the same probes.
//   - emulator wake-up lateness mean/max: how late the emulator's threads
//     woke for departures (package forward's own figures), to tell its
//     timer error from the rest of the path.
//   - machine timer wake-up lateness mean/max, and CPU time stolen by the
//     hypervisor, per phase: the machine's own baseline. A thread set up
//     like a forwarding thread (locked, 1 ns slack, SCHED_FIFO, raw ppoll)
//     but forwarding nothing sleeps 1 ms again and again during the phase
//     (forward.TimerProbe); its lateness is what the machine does to any
//     sleeping thread. Virtual machines whose virtual CPU the host
//     deschedules wake every thread late now and then (on the reference
//     machine, a KVM guest: up to 1.6 ms a few times per second, and the
//     same from a SCHED_FIFO C program sleeping with clock_nanosleep on
//     an idle machine: 1.5 ms at worst, 4 wake-ups over 500 us in 20 s). A
//     delay or jitter figure that fails in a phase in which the baseline
//     too woke more than 150 us late says so in its note and in a warning:
//     the miss is then the machine's, not the emulator's, and the
//     calibration should be repeated on a quieter machine.
//   - loss: probes that arrived with no intact copy, with the exact 95%
//     (Clopper-Pearson) interval. When losses are independent (random loss
//     without correlation, and duplicate and corrupt without correlation),
//     the configured probability is judged against the interval: FAIL when
//     it lies outside the 99.9% interval, ok (with a note) when it lies
//     outside the 95% one only. A run is one sample of its seed's random
//     stream, so a correct link leaves the configured value outside the 95%
//     interval for one seed in twenty (22 of 400 seeds with loss 5% over
//     20,000 packets); judging at 95% would fail correct links that often,
//     while a link applying a wrong probability misses by far more. Bursty
//     models are shown with their long-run rate, not judged (a binomial
//     interval does not apply).
//   - lost probes vs the seeded model: the same seed must lose exactly the
//     same number of probes (judged for links without trace and onoff,
//     whose drops depend on timing).
//   - duplicates: extra intact copies per probe, judged as loss is
//     (independent models).
//   - reorder: probes that arrived after a higher-numbered probe (RFC 4737
//     late packets), within max(0.1 percentage point, 10%) of the model's
//     count for the same probes; with `reorder`, the fraction sent early
//     (one-way delay under half the base delay) is judged against the
//     configured long-run fraction as loss is.
//   - delivered rate: within 2% of the configured rate (IP bytes, corrected
//     for packet overhead and cells, less the corrupted share the receiver
//     drops); traces and blackouts are shown, not judged. The note gives
//     the offered rate, the queue's drops and the emulator's CPU meanwhile.
//
// Throughput and CPU figures are shown next to the targets but never
// judged: they depend on the machine, not on the link's configuration.
//
// # Parallel testbeds
//
// RunParallel (`quicbench calibrate --parallel N[,N...]`) builds N testbeds
// with the same links, each with its own forwarder, and runs the idle and
// loaded phases above on all of them at once, for each N in turn. It
// reports the per-packet delay error per testbed and direction, pooled
// over the testbeds and for the worst one, judged against the delay
// tolerances, with the veth floor and the machine's timer baseline measured
// during the same phases, the machine's CPU busy share (/proc/stat) and the
// process's and forwarders' CPU.
//
// RunAdmitted (`quicbench calibrate --parallel N[,N...] --admitted`) asks
// the question of a parallel run's admission rule instead: testbed 1 runs
// the idle phase (probes at most 1,000 per second and direction, the veth
// floor and the timer baseline beside it) while each other testbed
// carries one bulk download through its link (QUIC and TLS over TCP in
// turn, calibrate's bulk endpoints as processes in its namespaces) as
// long as plan.Admission, with this machine's budget and the downloads'
// predicted loads (plan.CellLoad), admits it. It reports the probe
// testbed's per-packet error per N (N = 1 of the same run is the
// baseline), the loads predicted and measured (plan.MeasuredLoad of the
// transfers' processes' CPU), the transfers' goodput, and what a testbed
// holds: the drop of MemAvailable, this process's file descriptors and
// threads, a bulk server's proportional set size.
//
// Run returns a Report; Report.Failed lists the judged figures outside
// their tolerance.
//
// Linux only; needs root (or root in a user namespace) to build namespaces.
package calibrate

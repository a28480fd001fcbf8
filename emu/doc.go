// Package emu holds the types shared by quicbench's link emulator: Time and
// Clock, the Packet and its preallocated Pool, and the per-direction
// Counters.
//
// The emulator itself is in the subpackages: spec parses link specs (tc-netem
// grammar plus trace, queue and onoff), trace reads mahimahi traces, and
// pipeline is the deterministic per-direction pipeline a forwarder drives.
// They use the standard library only. spec is pure; trace is the only one
// that opens files (Load), and pipeline reads a trace file through it when it
// is built from a spec that names one. Packets go through a pipeline without
// I/O, goroutines or allocation, at the times its caller passes in; the only
// clock read here is MonotonicClock's. The TUN forwarding lives elsewhere.
// docs/link-spec.md documents the behaviour.
package emu

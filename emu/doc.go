// Package emu holds the types shared by quicbench's link emulator: Time and
// Clock, the Packet and its preallocated Pool, and the per-direction
// Counters.
//
// The emulator itself is in the subpackages: spec parses link specs (tc-netem
// grammar plus trace, queue and onoff), trace reads mahimahi traces, and
// pipeline is the deterministic per-direction pipeline a forwarder drives.
// Everything here is pure and deterministic (no I/O except reading trace
// files, no goroutines, no allocation per packet); the TUN forwarding lives
// elsewhere. docs/link-spec.md documents the behaviour.
package emu

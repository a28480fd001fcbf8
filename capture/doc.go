// Package capture writes what quicbench's emulator saw of a sample as a
// pcapng file that Wireshark and tshark open: every wire packet of both
// directions (one interface each), stamped when it left the emulator or
// was dropped, with the emulator's verdict in its comment (delivered, or
// dropped by loss, queue, mtu or blackout; reordered, duplicated,
// corrupted) and when it entered; the TLS secrets of the sample's
// connections in a Decryption Secrets Block, so that Wireshark decrypts
// QUIC and TLS with no other file.
//
// The packets come from the forwarder's tap (forward.Options.Tap): a
// Session drains both directions' rings on its own goroutine for as long
// as the testbed lives, and writes the packets between Begin and End (one
// sample) to a Segment. Begin and End take their instants on the
// forwarding threads (forward.Forwarder.Mark), so a segment's verdicts
// count exactly what the links' counters count between them (less what the
// rings or the run's capture budget could not keep, which is counted too).
// A Segment also gives the sample's wire timing (WireTiming): TTFB and
// goodput as the packets show them, for stacks that report no timing of
// their own.
//
// keys.go cuts a sample's lines out of key log files that endpoints append
// to (SSLKEYLOGFILE format).
package capture

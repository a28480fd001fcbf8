// Package tun creates Linux TUN devices for the link emulator.
//
// A Device is a layer-3 TUN interface (IFF_TUN|IFF_NO_PI) created in the
// network namespace of the calling OS thread; its file descriptor is
// non-blocking and meant to be driven from a dedicated, locked OS thread
// (package forward) with poll(2), not through Go's netpoller, so that the
// forwarder controls its own wake-up precision.
//
// With Options.VnetHdr, every packet read or written is preceded by a
// virtio_net_hdr (10 bytes) and, with Options.Offloads, the kernel may hand
// over TSO/USO super-packets; package tun/offload segments and coalesces
// those. Without it, each read returns exactly one IP packet.
package tun

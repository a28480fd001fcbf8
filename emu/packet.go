package emu

import (
	"fmt"
	"sync"
)

// Packet is one wire packet: an IPv4 or IPv6 packet exactly as read from a
// TUN device, with no extra header. Packets come from a Pool and go back to
// it; whoever holds a Packet owns it until it hands it on (to a Pipeline, or
// back to the Pool).
type Packet struct {
	// Data holds the packet's bytes: len(Data) is the packet length. It is
	// backed by a buffer of the Pool's bufSize bytes; reslice it within its
	// capacity (Data[:cap(Data)] to read into, then Data[:n]).
	Data []byte

	buf  []byte // the full buffer, restored by Put
	pool *Pool
	free bool // in the pool's free list
}

// Pool is a fixed set of preallocated Packets. Get and Put are safe for
// concurrent use and never allocate. All buffers live in one slab, so a pool
// of 8192 packets of 2048 bytes is one 16 MiB allocation.
type Pool struct {
	mu      sync.Mutex
	free    []*Packet
	count   int
	bufSize int
}

// NewPool returns a pool of count packets with bufSize-byte buffers. It
// panics if count or bufSize is not positive (a programming error).
func NewPool(count, bufSize int) *Pool {
	if count <= 0 || bufSize <= 0 {
		panic(fmt.Sprintf("emu.NewPool(%d, %d): count and bufSize must be positive", count, bufSize))
	}
	p := &Pool{free: make([]*Packet, count), count: count, bufSize: bufSize}
	slab := make([]byte, count*bufSize)
	pkts := make([]Packet, count)
	for i := range pkts {
		b := slab[i*bufSize : (i+1)*bufSize : (i+1)*bufSize]
		pkts[i] = Packet{Data: b[:0], buf: b, pool: p, free: true}
		p.free[i] = &pkts[i]
	}
	return p
}

// Get takes a packet from the pool: its Data has length 0 and capacity
// bufSize. It returns nil when every packet is in use.
func (p *Pool) Get() *Packet {
	p.mu.Lock()
	n := len(p.free)
	if n == 0 {
		p.mu.Unlock()
		return nil
	}
	pkt := p.free[n-1]
	p.free = p.free[:n-1]
	pkt.free = false
	p.mu.Unlock()
	return pkt
}

// Put returns pkt to the pool; the caller must not touch it afterwards. A nil
// pkt is ignored. Putting a packet twice, or into a pool it did not come
// from, is a programming error and panics (it would otherwise hand the same
// buffer to two owners).
func (p *Pool) Put(pkt *Packet) {
	if pkt == nil {
		return
	}
	if pkt.pool != p {
		panic("emu: Pool.Put of a packet from another pool")
	}
	pkt.Data = pkt.buf[:0]
	p.mu.Lock()
	if pkt.free {
		p.mu.Unlock()
		panic("emu: Pool.Put of a packet already in the pool")
	}
	pkt.free = true
	p.free = append(p.free, pkt) // never grows: at most count packets
	p.mu.Unlock()
}

// Cap returns the number of packets the pool was built with.
func (p *Pool) Cap() int { return p.count }

// BufSize returns the capacity of every packet's buffer.
func (p *Pool) BufSize() int { return p.bufSize }

// Available returns how many packets are in the pool right now.
func (p *Pool) Available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

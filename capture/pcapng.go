package capture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

// The pcapng file of a sample (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-03.html):
//
//	Section Header Block     application "quicbench", a comment naming the sample
//	Interface Description 0  "up": client -> server, LINKTYPE_RAW (IPv4/IPv6), ns timestamps
//	Interface Description 1  "down": server -> client
//	Decryption Secrets Block the TLS key log of the sample's connections (when there is one)
//	Enhanced Packet Blocks   one per wire packet, with a comment: the emulator's verdict
//	Interface Statistics 0,1 packets recorded, and packets not recorded (ifdrop)
//
// The header blocks, the secrets and the statistics are written with
// gopacket's pcapgo.NgWriter. The Enhanced Packet Blocks are written here:
// pcapgo allocates several objects per packet for a commented one (the
// options slice, the comment's string and its byte copy), and these are
// written while a sample runs, at up to ~170,000 packets per second, in
// the process whose forwarding threads must not meet garbage collection
// pauses; appendEPB allocates nothing.

// Interface indexes of the two directions.
const (
	IfaceUp   = 0 // client -> server
	IfaceDown = 1 // server -> client
)

// pcapng block types and option codes written by appendEPB.
const (
	blockEPB       = 0x00000006
	optEndOfOpt    = 0
	optComment     = 1
	epbFixedLength = 32 // block type, length, interface, 2 x timestamp, captured, original, trailing length
)

// appendEPB appends one Enhanced Packet Block: interface iface, timestamp
// ts (ns since the Unix epoch), the packet's original length, its captured
// bytes and a comment (none when empty).
func appendEPB(b []byte, iface uint32, ts int64, origLen uint32, data, comment []byte) []byte {
	dataPad := (4 - len(data)&3) & 3
	optLen := 0
	if len(comment) > 0 {
		optLen = 4 + len(comment) + (4-len(comment)&3)&3 + 4 // comment, then end of options
	}
	total := epbFixedLength + len(data) + dataPad + optLen
	le := binary.LittleEndian
	b = le.AppendUint32(b, blockEPB)
	b = le.AppendUint32(b, uint32(total))
	b = le.AppendUint32(b, iface)
	b = le.AppendUint32(b, uint32(uint64(ts)>>32))
	b = le.AppendUint32(b, uint32(ts))
	b = le.AppendUint32(b, uint32(len(data)))
	b = le.AppendUint32(b, origLen)
	b = append(b, data...)
	b = append(b, zeros[:dataPad]...)
	if len(comment) > 0 {
		b = le.AppendUint16(b, optComment)
		b = le.AppendUint16(b, uint16(len(comment)))
		b = append(b, comment...)
		b = append(b, zeros[:(4-len(comment)&3)&3]...)
		b = le.AppendUint32(b, optEndOfOpt) // code 0, length 0
	}
	return le.AppendUint32(b, uint32(total))
}

var zeros [4]byte

// appendComment appends the comment of record r: its verdict, then for a
// packet that spent time in the emulator when it entered (relative to the
// packet's timestamp, which is when it left or was dropped) and, for a
// delivered one, how that time divides into its drawn delay and the rest
// (the link counters' queue delay: waiting in the queue, serialization at
// the link's rate, blackouts, the emulator's own lateness), and its marks.
//
//	delivered, entered 25.513042 ms earlier: delay 25.000000 ms + queue 0.513042 ms, reordered
//	dropped by loss
//	dropped by queue, entered 5.210000 ms earlier
func appendComment(b []byte, r *forward.Record) []byte {
	if r.Kind == forward.KindICMP {
		return append(b, "sent by the emulator: ICMP fragmentation needed for a packet above the link's mtu"...)
	}
	b = append(b, r.Verdict.String()...)
	if d := int64(r.At - r.In); d > 0 || r.Verdict == pipeline.Delivered {
		b = append(b, ", entered "...)
		b = appendMs(b, d)
		b = append(b, " ms earlier"...)
		if r.Verdict == pipeline.Delivered {
			b = append(b, ": delay "...)
			b = appendMs(b, r.Delay)
			b = append(b, " ms + queue "...)
			b = appendMs(b, max(d-r.Delay, 0))
			b = append(b, " ms"...)
		}
	}
	for _, m := range []struct {
		m    pipeline.Marks
		name string
	}{
		{pipeline.MarkReordered, ", reordered"},
		{pipeline.MarkDuplicate, ", duplicate"},
		{pipeline.MarkCorrupted, ", corrupted"},
		{pipeline.MarkEarly, ", sent early by reorder"},
	} {
		if r.Marks&m.m != 0 {
			b = append(b, m.name...)
		}
	}
	return b
}

// appendMs appends ns as milliseconds with six decimals.
func appendMs(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1e6, 10)
	b = append(b, '.')
	frac := ns % 1e6
	for div := int64(1e5); div > 0; div /= 10 {
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

// Info describes a capture in its header blocks.
type Info struct {
	Comment string // section comment, e.g. the sample it belongs to
	Snap    int    // the tap's snap length (interface snaplen)
	Version string // quicbench's version, for the application option
	// Counts per interface for the statistics blocks: packets recorded,
	// and packets not recorded (the tap's ring was full, or the run's
	// capture limit was reached).
	Recorded, Missed [2]uint64
	Start, End       time.Time
}

// writeHeader writes the section header, both interfaces and, when keys
// is not empty, a Decryption Secrets Block of TLS key log lines
// (SSLKEYLOGFILE format, Wireshark's "TLS key log"). It returns the
// writer, for the statistics blocks after the packets.
func writeHeader(w io.Writer, info Info, keys []byte) (*pcapgo.NgWriter, error) {
	app := "quicbench"
	if info.Version != "" {
		app += " " + info.Version
	}
	opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: app, Comment: info.Comment,
	}}
	snap := uint32(max(info.Snap, 0))
	up := pcapgo.NgInterface{
		Name: "up", Description: "client -> server: packets entering the emulated link from the client namespace",
		LinkType: layers.LinkTypeRaw, SnapLength: snap, TimestampResolution: 9,
	}
	ngw, err := pcapgo.NewNgWriterInterface(w, up, opts)
	if err != nil {
		return nil, err
	}
	down := up
	down.Name, down.Description = "down", "server -> client: packets entering the emulated link from the server namespace"
	if _, err := ngw.AddInterface(down); err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		if err := ngw.WriteDecryptionSecretsBlock(pcapgo.DSB_SECRETS_TYPE_TLS, keys); err != nil {
			return nil, err
		}
	}
	return ngw, ngw.Flush()
}

// writeStats writes both interfaces' statistics blocks.
func writeStats(ngw *pcapgo.NgWriter, info Info) error {
	for i := 0; i < 2; i++ {
		st := pcapgo.NgInterfaceStatistics{
			LastUpdate: info.End, StartTime: info.Start, EndTime: info.End,
			PacketsReceived: info.Recorded[i], PacketsDropped: info.Missed[i],
		}
		if err := ngw.WriteInterfaceStats(i, st); err != nil {
			return err
		}
	}
	return ngw.Flush()
}

// Assemble writes a whole pcapng file to w: the header blocks with keys
// as the Decryption Secrets Block, the Enhanced Packet Blocks read from
// body (as a Segment wrote them) and the statistics blocks.
func Assemble(w io.Writer, info Info, keys []byte, body io.Reader) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	ngw, err := writeHeader(bw, info, keys)
	if err != nil {
		return fmt.Errorf("capture: header: %w", err)
	}
	if _, err := io.Copy(bw, body); err != nil {
		return fmt.Errorf("capture: packets: %w", err)
	}
	if err := writeStats(ngw, info); err != nil {
		return fmt.Errorf("capture: statistics: %w", err)
	}
	return bw.Flush()
}

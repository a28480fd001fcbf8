package netns

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// UDPReceiveBufferErrors returns how many UDP datagrams side s's namespace
// has dropped since it was created because the receiving socket's buffer
// was full (Udp RcvbufErrors in /proc/net/snmp). A receiver that cannot
// keep up, such as a QUIC endpoint short of CPU, loses datagrams there,
// which its sender takes for losses on the path. The difference between two
// readings is the count of an interval. One reading enters the namespace
// on a locked thread and reads one proc file: tens of microseconds.
func (t *Testbed) UDPReceiveBufferErrors(s Side) (uint64, error) {
	var n uint64
	err := t.Do(s, func() error {
		var err error
		n, err = ReadUDPReceiveBufferErrors()
		return err
	})
	return n, err
}

// ReadUDPReceiveBufferErrors returns the Udp RcvbufErrors counter of the
// network namespace of the calling thread, as UDPReceiveBufferErrors does
// for a testbed's side. Call it inside a function that runs on a thread
// locked in a namespace (Testbed.Do, or another such helper); elsewhere it
// reads the namespace of whichever thread the goroutine runs on.
func ReadUDPReceiveBufferErrors() (uint64, error) {
	b, err := os.ReadFile("/proc/thread-self/net/snmp")
	if err != nil {
		return 0, err
	}
	return parseUDPRcvbufErrors(string(b))
}

// parseUDPRcvbufErrors finds Udp: RcvbufErrors in /proc/net/snmp's text
// (a header line naming the fields, then a line of values).
func parseUDPRcvbufErrors(snmp string) (uint64, error) {
	var header []string
	for line := range strings.SplitSeq(snmp, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
		break
	}
	return 0, errors.New("/proc/net/snmp: no Udp RcvbufErrors")
}

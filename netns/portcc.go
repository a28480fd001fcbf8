package netns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// portCCTable is the first routing table PortCC uses; port P's is
// portCCTable + P. portCCPriority is its rules' priority, before the main
// table's (32766).
const (
	portCCTable    = 10000
	portCCPriority = 1000
)

// PortCC gives congestion control cc to the TCP connections between the
// namespaces whose server-side port is port, whatever the testbed's
// routes carry for the others (SetCC): a rule in each namespace (sport in
// the server's, dport in the client's) sends those connections through a
// routing table of their own whose route across the link carries cc. The
// kernel applies a route's algorithm when a connection is set up, so a
// connection keeps cc after the rule is removed. It is how competing
// flows of another congestion control than the sample's share the link
// (package traffic). The returned function removes the rules and tables;
// they are also gone with the testbed's namespaces.
func (t *Testbed) PortCC(port uint16, cc string) (remove func(), err error) {
	if err := checkCC(cc); err != nil {
		return nil, &configError{err}
	}
	if port == 0 {
		return nil, errors.New("netns: PortCC needs a port")
	}
	table := strconv.Itoa(portCCTable + int(port))
	prio := strconv.Itoa(portCCPriority)
	p := strconv.Itoa(int(port))
	type step struct {
		side Side
		args []string
	}
	add := []step{
		{Server, []string{"route", "replace", t.prefix(Client).Masked().String(), "dev", DeviceName, "table", table, "congctl", cc}},
		{Server, []string{"rule", "add", "priority", prio, "ipproto", "tcp", "sport", p, "table", table}},
		{Client, []string{"route", "replace", t.prefix(Server).Masked().String(), "dev", DeviceName, "table", table, "congctl", cc}},
		{Client, []string{"rule", "add", "priority", prio, "ipproto", "tcp", "dport", p, "table", table}},
	}
	del := []step{
		{Server, []string{"rule", "del", "priority", prio, "ipproto", "tcp", "sport", p, "table", table}},
		{Server, []string{"route", "flush", "table", table}},
		{Client, []string{"rule", "del", "priority", prio, "ipproto", "tcp", "dport", p, "table", table}},
		{Client, []string{"route", "flush", "table", table}},
	}
	ip := func(s step) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := t.Command(ctx, s.side, "ip", s.args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("netns: %s namespace: ip %s: %v: %s", s.side, strings.Join(s.args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	remove = func() {
		for _, s := range del {
			_ = ip(s)
		}
	}
	for _, s := range add {
		if err := ip(s); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

package replay

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/quicbench/quicbench/har"
)

// MaxGroups is the most addresses a layout may use: the origins' addresses
// are taken from the server side's /24 of a testbed from host number
// FirstHost on, below the broadcast address.
const (
	FirstHost = 10
	MaxGroups = 254 - FirstHost
)

// Group is one address of a layout and the origins it serves: hosts that
// shared a recorded server address (serverIPAddress) in an archive share
// one, as they shared a server; every other host has one of its own.
type Group struct {
	Addr  string   `json:"addr"`  // the IP address (Layout.Assign)
	Hosts []string `json:"hosts"` // host names, lower case, sorted
	Ports []int    `json:"ports"` // TCP and UDP ports served, sorted
}

// Layout places the origins of every archive of a run on addresses, one
// layout for the whole run: a host name has the same address in every
// archive, so that a client's name mapping never changes during a run.
type Layout struct {
	Groups []Group `json:"groups"`
}

// NewLayout groups the hosts of the archives (in their order, each's hosts
// in the order their first request started: the first group holds the
// first archive's document).
func NewLayout(archives ...*Archive) (*Layout, error) {
	parent := map[string]string{}
	var find func(string) string
	find = func(h string) string {
		p, ok := parent[h]
		if !ok {
			parent[h] = h
			return h
		}
		if p == h {
			return h
		}
		r := find(p)
		parent[h] = r
		return r
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra != rb {
			parent[rb] = ra
		}
	}
	var order []string
	seen := map[string]bool{}
	for _, a := range archives {
		byIP := map[string]string{}
		for _, h := range a.hostOrder {
			if !seen[h] {
				seen[h] = true
				order = append(order, h)
				find(h)
			}
			for _, ip := range a.ips[h] {
				if first, ok := byIP[ip]; ok {
					union(first, h)
				} else {
					byIP[ip] = h
				}
			}
		}
	}
	index := map[string]int{}
	l := &Layout{}
	ports := map[int]map[int]bool{}
	for _, h := range order {
		r := find(h)
		i, ok := index[r]
		if !ok {
			i = len(l.Groups)
			index[r] = i
			l.Groups = append(l.Groups, Group{})
			ports[i] = map[int]bool{}
		}
		l.Groups[i].Hosts = append(l.Groups[i].Hosts, h)
		for _, a := range archives {
			for _, p := range a.ports[h] {
				ports[i][p] = true
			}
		}
	}
	for i := range l.Groups {
		sort.Strings(l.Groups[i].Hosts)
		for p := range ports[i] {
			l.Groups[i].Ports = append(l.Groups[i].Ports, p)
		}
		sort.Ints(l.Groups[i].Ports)
	}
	if len(l.Groups) > MaxGroups {
		return nil, fmt.Errorf("replay: the archives need %d server addresses (one per origin, origins of one recorded address sharing one); a testbed has %d", len(l.Groups), MaxGroups)
	}
	return l, nil
}

// OriginAddr returns the address of group i on the server side whose own
// address is server: the same /24, host number FirstHost+i.
func OriginAddr(server netip.Addr, i int) (netip.Addr, error) {
	if !server.Is4() {
		return netip.Addr{}, fmt.Errorf("replay: server address %s is not IPv4", server)
	}
	if i < 0 || i >= MaxGroups {
		return netip.Addr{}, fmt.Errorf("replay: origin address %d out of range 0..%d", i, MaxGroups-1)
	}
	b := server.As4()
	b[3] = byte(FirstHost + i)
	return netip.AddrFrom4(b), nil
}

// Assign gives every group its address on the server side whose own
// address is server (OriginAddr).
func (l *Layout) Assign(server netip.Addr) error {
	for i := range l.Groups {
		a, err := OriginAddr(server, i)
		if err != nil {
			return err
		}
		l.Groups[i].Addr = a.String()
	}
	return nil
}

// Addrs returns the groups' addresses.
func (l *Layout) Addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(l.Groups))
	for _, g := range l.Groups {
		if a, err := netip.ParseAddr(g.Addr); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// HostAddrs maps every host name to its group's address.
func (l *Layout) HostAddrs() map[string]string {
	m := map[string]string{}
	for _, g := range l.Groups {
		for _, h := range g.Hosts {
			m[h] = g.Addr
		}
	}
	return m
}

// Origins lists every host:port served (each group's hosts on each of its
// ports), sorted: the origins a browser must reach over QUIC for h3.
func (l *Layout) Origins() []string {
	var out []string
	for _, g := range l.Groups {
		for _, h := range g.Hosts {
			for _, p := range g.Ports {
				out = append(out, net.JoinHostPort(h, strconv.Itoa(p)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// Spec is what a server process needs to serve a run's replays: the
// archives (files) with their missing-body policy, and the layout with
// its addresses. The runner writes it; `quicbench serve --replay FILE`
// reads it.
type Spec struct {
	Sites  []SiteSpec `json:"sites"`
	Layout Layout     `json:"layout"`
}

// SiteSpec is one archive of a Spec.
type SiteSpec struct {
	Name    string `json:"name"`
	HAR     string `json:"har"`     // the file
	Missing string `json:"missing"` // MissingRefuse or MissingFill
}

// WriteSpec writes s as JSON to file.
func WriteSpec(file string, s *Spec) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// LoadSpec reads a Spec, prepares its archives and checks that the
// layout covers every host of every archive.
func LoadSpec(file string) (*Spec, []*Archive, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, nil, fmt.Errorf("replay spec %s: %w", file, err)
	}
	if len(s.Sites) == 0 {
		return nil, nil, fmt.Errorf("replay spec %s: no sites", file)
	}
	var archives []*Archive
	for _, site := range s.Sites {
		h, err := har.ReadFile(site.HAR)
		if err != nil {
			return nil, nil, err
		}
		a, err := Prepare(site.Name, h, Options{Missing: site.Missing})
		if err != nil {
			return nil, nil, err
		}
		archives = append(archives, a)
	}
	if err := s.Layout.check(archives); err != nil {
		return nil, nil, fmt.Errorf("replay spec %s: %w", file, err)
	}
	return &s, archives, nil
}

// check verifies that every group has an address and that every host of
// the archives is in exactly one group that serves its ports.
func (l *Layout) check(archives []*Archive) error {
	where := map[string]int{}
	for i, g := range l.Groups {
		if _, err := netip.ParseAddr(g.Addr); err != nil {
			return fmt.Errorf("group %d: address %q: %v", i, g.Addr, err)
		}
		if len(g.Ports) == 0 {
			return fmt.Errorf("group %d (%s): no port", i, g.Addr)
		}
		for _, h := range g.Hosts {
			if j, dup := where[h]; dup {
				return fmt.Errorf("host %s in groups %d and %d", h, j, i)
			}
			where[h] = i
		}
	}
	for _, a := range archives {
		for _, h := range a.hostOrder {
			i, ok := where[h]
			if !ok {
				return fmt.Errorf("%s: host %s has no address", a.Name, h)
			}
			for _, p := range a.ports[h] {
				if !slices.Contains(l.Groups[i].Ports, p) {
					return fmt.Errorf("%s: host %s: port %d not served at %s", a.Name, h, p, l.Groups[i].Addr)
				}
			}
		}
	}
	return nil
}

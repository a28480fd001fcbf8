package netns

import (
	"fmt"
	"net/netip"

	"github.com/quicbench/quicbench/internal/rtnl"
)

// AddAddrs adds addresses of side s's subnet to its device, each as a
// /32 (an address already there is kept): the other side reaches them
// through the emulated link like the side's own address, since its route
// to the subnet crosses the link. A replay puts each recorded origin on
// an address of its own this way (package replay, OriginAddr). The
// addresses go with the namespace.
func (t *Testbed) AddAddrs(s Side, addrs ...netip.Addr) error {
	subnet := t.prefix(s).Masked()
	var ps []netip.Prefix
	for _, a := range addrs {
		if !subnet.Contains(a) || a == t.RouterAddr(s) || a == subnet.Addr() || a.As4()[3] == 255 {
			return fmt.Errorf("address %s is not a host address of the %s subnet %s", a, s, subnet)
		}
		ps = append(ps, netip.PrefixFrom(a, 32))
	}
	return t.Do(s, func() error { return rtnl.AddAddrs(DeviceName, ps...) })
}

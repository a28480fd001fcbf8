package browser

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// ReplayOptions sets o up to load a replayed page (package replay): every
// recorded host name goes to its origin's address with no DNS lookup at
// all (--host-resolver-rules; any other name fails at once), and for h3
// every origin (host:port) is reached over QUIC directly
// (--origin-to-force-quic-on names them all, which is also what lets
// Chromium accept the replay's certificates over QUIC: the SPKI list
// applies to QUIC only for the origins named there). hosts and origins
// cover a whole run, so that a browser kept across samples never needs
// another mapping.
func (o *Options) ReplayOptions(hosts map[string]string, origins []string) {
	o.ExtraArgs = append(o.ExtraArgs, "--host-resolver-rules="+HostResolverRules(hosts))
	if o.Protocol == model.ProtoH3 && len(origins) > 0 {
		o.ForceQUICOrigin = strings.Join(origins, ",")
	}
}

// HostResolverRules is the value of Chromium's --host-resolver-rules that
// maps each host name to its address and every other name to "not
// found", sorted by name.
func HostResolverRules(hosts map[string]string) string {
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	rules := make([]string, 0, len(names)+1)
	for _, h := range names {
		addr := hosts[h]
		if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
			addr = "[" + addr + "]"
		}
		rules = append(rules, "MAP "+h+" "+addr)
	}
	return strings.Join(append(rules, "MAP * ~NOTFOUND"), ",")
}

package firefox

import (
	"net"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// ReplayOptions sets o up to load a replayed page (package replay). The
// host names resolve through the system's files, which the client agent
// maps to the origins' addresses in its own mount namespace (package
// hostmap); Firefox is told to use nothing else (no DNS prefetch, no
// HTTPS records, no DNS over HTTPS, IPv4 only), and for h3 every origin
// (host:port) is mapped to HTTP/3 on its port, so that each is reached
// over QUIC from its first request. origins covers a whole run, so that a
// browser kept across samples never needs another mapping.
func (o *Options) ReplayOptions(origins []string) {
	if o.Prefs == nil {
		o.Prefs = map[string]any{}
	}
	o.Prefs["network.dns.native_https_query"] = false
	o.Prefs["network.dns.disableIPv6"] = true
	o.Prefs["network.dns.disablePrefetch"] = true
	o.Prefs["network.trr.mode"] = 5
	if o.Protocol == model.ProtoH3 && len(origins) > 0 {
		o.Prefs["network.http.http3.alt-svc-mapping-for-testing"] = H3Mappings(origins)
	}
}

// H3Mappings is the value of network.http.http3.alt-svc-mapping-for-testing
// that maps every host:port to HTTP/3 on its port.
func H3Mappings(origins []string) string {
	var m []string
	for _, hp := range origins {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		m = append(m, host+";h3=:"+port)
	}
	return strings.Join(m, ",")
}

package replay

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Origins serves a layout's origins from a set of archives, one archive
// at a time (Begin selects it, End returns what was served), and keeps
// the per-sample counts.
type Origins struct {
	layout   *Layout
	archives map[string]*Archive
	names    []string
	groupOf  map[string]int // host -> group

	mu       sync.Mutex
	active   *Archive
	proto    string // the sample's protocol ("" before any Begin)
	seq      map[string]int
	st       Stats
	byOrigin map[string]*OriginStats
}

// Stats is what a replay served during one sample (between Begin and
// End).
type Stats struct {
	Site     string `json:"site"`
	Protocol string `json:"protocol"` // the sample's
	// Requests were answered from a recorded entry (Filled of them with
	// filler bytes); Unmatched got a 404.
	Requests  int `json:"requests"`
	Unmatched int `json:"unmatched"`
	Filled    int `json:"filled"`
	// Preflights counts CORS preflight requests (OPTIONS) that no entry
	// matched, answered with a 204 allowing what they asked.
	Preflights int `json:"preflights,omitempty"`
	// Misrouted counts requests that arrived at another address than
	// their host's (its origin's): 0 when every origin is reached at its
	// own address.
	Misrouted int `json:"misrouted"`
	// WrongProtocol counts connections and requests over another protocol
	// than the sample's.
	WrongProtocol int `json:"wrong_protocol"`
	// Bytes are the response body bytes sent, as encoded on the wire.
	Bytes int64 `json:"bytes"`
	// Origins are the origins contacted (by connection or request), by
	// host name.
	Origins []OriginStats `json:"origins"`
	// UnmatchedURLs are the first unmatched requests (method and URL).
	UnmatchedURLs []string `json:"unmatched_urls,omitempty"`
}

// OriginStats is one origin's share of a sample.
type OriginStats struct {
	Host     string `json:"host"`
	Addr     string `json:"addr"` // the address it is served at
	Requests int    `json:"requests"`
	Bytes    int64  `json:"bytes"`
	// Conns counts the connections opened to this host, by protocol
	// ("http/1.1", "h2", "h3").
	Conns map[string]int `json:"conns"`
}

// ConnTotal is the number of connections to the origin.
func (o OriginStats) ConnTotal() int {
	n := 0
	for _, c := range o.Conns {
		n += c
	}
	return n
}

// Connections returns the connections of the sample by protocol.
func (s *Stats) Connections() map[string]int {
	m := map[string]int{}
	for _, o := range s.Origins {
		for p, n := range o.Conns {
			m[p] += n
		}
	}
	return m
}

// maxUnmatchedURLs bounds Stats.UnmatchedURLs.
const maxUnmatchedURLs = 20

// NewOrigins serves the archives with layout, which must hold their hosts.
func NewOrigins(layout *Layout, archives []*Archive) (*Origins, error) {
	if err := layout.check(archives); err != nil {
		return nil, err
	}
	o := &Origins{layout: layout, archives: map[string]*Archive{}, groupOf: map[string]int{}}
	for _, a := range archives {
		if _, dup := o.archives[a.Name]; dup {
			return nil, fmt.Errorf("replay: two archives named %s", a.Name)
		}
		o.archives[a.Name] = a
		o.names = append(o.names, a.Name)
	}
	for i, g := range layout.Groups {
		for _, h := range g.Hosts {
			o.groupOf[h] = i
		}
	}
	if len(archives) == 1 {
		o.active = archives[0]
	}
	o.reset()
	return o, nil
}

// Layout returns the layout served.
func (o *Origins) Layout() *Layout { return o.layout }

// Archive returns the archive of the given name.
func (o *Origins) Archive(name string) (*Archive, bool) {
	a, ok := o.archives[name]
	return a, ok
}

// Names lists the archives' names in the order given.
func (o *Origins) Names() []string { return append([]string(nil), o.names...) }

func (o *Origins) reset() {
	o.seq = map[string]int{}
	o.byOrigin = map[string]*OriginStats{}
	o.st = Stats{Protocol: o.proto}
	if o.active != nil {
		o.st.Site = o.active.Name
	}
}

// Begin starts a sample of the archive named site over protocol proto
// (model.ProtoH1, ProtoH2 or ProtoH3): requests are answered from it, and
// the counts start from zero.
func (o *Origins) Begin(site, proto string) error {
	a, ok := o.archives[site]
	if !ok {
		return fmt.Errorf("replay: no archive %q (served: %s)", site, strings.Join(o.names, ", "))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active, o.proto = a, proto
	o.reset()
	return nil
}

// End returns what was served since Begin, and starts counting anew.
func (o *Origins) End() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.st
	hosts := make([]string, 0, len(o.byOrigin))
	for h := range o.byOrigin {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		st.Origins = append(st.Origins, *o.byOrigin[h])
	}
	o.reset()
	return st
}

// origin returns the counts of host, creating them (under o.mu).
func (o *Origins) origin(host string) *OriginStats {
	s := o.byOrigin[host]
	if s == nil {
		s = &OriginStats{Host: host, Conns: map[string]int{}}
		if g, ok := o.groupOf[host]; ok {
			s.Addr = o.layout.Groups[g].Addr
		}
		o.byOrigin[host] = s
	}
	return s
}

// wantALPN is the ALPN of a protocol name.
func wantALPN(proto string) string {
	switch proto {
	case "h1", "h1c":
		return "http/1.1"
	case "":
		return ""
	}
	return proto
}

// Conn records a connection to group's address, for the host the client
// named in its TLS server name, with the negotiated ALPN.
func (o *Origins) Conn(group int, serverName, alpn string) {
	host := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if alpn == "" {
		alpn = "http/1.1"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if host == "" {
		host = "(no server name)"
	}
	o.origin(host).Conns[alpn]++
	if g, ok := o.groupOf[host]; !ok || g != group {
		o.st.Misrouted++
	}
	if w := wantALPN(o.proto); w != "" && w != alpn {
		o.st.WrongProtocol++
	}
}

// requestALPN is the protocol a request came over, as an ALPN.
func requestALPN(r *http.Request) string {
	switch r.ProtoMajor {
	case 3:
		return "h3"
	case 2:
		return "h2"
	}
	return "http/1.1"
}

// Handler answers the requests that arrive at group's address.
func (o *Origins) Handler(group int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { o.serve(group, w, r) })
}

func (o *Origins) serve(group int, w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	uri := r.URL.RequestURI()
	if r.URL.Opaque != "" || r.RequestURI == "*" {
		uri = r.RequestURI
	}
	method := strings.ToUpper(r.Method)

	o.mu.Lock()
	a := o.active
	if a == nil {
		o.mu.Unlock()
		http.Error(w, "quicbench replay: no archive selected (serving "+strings.Join(o.names, ", ")+")", http.StatusServiceUnavailable)
		return
	}
	ost := o.origin(host)
	if g, ok := o.groupOf[host]; !ok || g != group {
		o.st.Misrouted++
	}
	if w := wantALPN(o.proto); w != "" && w != requestALPN(r) {
		o.st.WrongProtocol++
	}
	e, err := a.match(method, host, uri, r.URL.Query(), o.seq)
	if err != nil && method == http.MethodHead {
		// A HEAD the page did not record: the GET's headers.
		e, err = a.match(http.MethodGet, host, uri, r.URL.Query(), o.seq)
	}
	if err != nil && method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A CORS preflight the export left out (browsers' exports often
		// do): allow what is asked, so the request it precedes is
		// answered from its recording.
		o.st.Preflights++
		o.mu.Unlock()
		h := w.Header()
		if origin := r.Header.Get("Origin"); origin != "" {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Vary", "Origin")
		} else {
			h.Set("Access-Control-Allow-Origin", "*")
		}
		h.Set("Access-Control-Allow-Methods", r.Header.Get("Access-Control-Request-Method"))
		if hs := r.Header.Get("Access-Control-Request-Headers"); hs != "" {
			h.Set("Access-Control-Allow-Headers", hs)
		}
		h.Set("Access-Control-Max-Age", "600")
		h.Set("Timing-Allow-Origin", "*")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		o.st.Unmatched++
		if len(o.st.UnmatchedURLs) < maxUnmatchedURLs {
			o.st.UnmatchedURLs = append(o.st.UnmatchedURLs, method+" https://"+host+uri)
		}
		o.mu.Unlock()
		http.Error(w, "quicbench replay: no recorded response for "+method+" "+host+uri, http.StatusNotFound)
		return
	}
	o.st.Requests++
	ost.Requests++
	if e.filled {
		o.st.Filled++
	}
	o.mu.Unlock()

	enc := e.choose(r.Header.Get("Accept-Encoding"))
	body := e.encode(enc)
	if body == nil && enc != "" { // compression failed: send it as it is
		enc, body = "", e.body
	}
	h := w.Header()
	for k, v := range e.header {
		h[k] = v
	}
	if enc != "" {
		h.Set("Content-Encoding", enc)
	}
	bodyless := e.status == http.StatusNoContent || e.status == http.StatusNotModified || e.status < 200
	if !bodyless {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(e.status)
	if bodyless || method == http.MethodHead {
		return
	}
	n, _ := w.Write(body)
	o.mu.Lock()
	o.st.Bytes += int64(n)
	ost.Bytes += int64(n)
	o.mu.Unlock()
}

// match returns the entry answering a request (see the package comment);
// seq counts the requests per exact key within the sample.
func (a *Archive) match(method, host, uri string, query map[string][]string, seq map[string]int) (*entry, error) {
	k := method + " " + host + uri
	if list := a.exact[k]; len(list) > 0 {
		n := seq[k]
		seq[k] = n + 1
		return list[min(n, len(list)-1)], nil
	}
	path, _, _ := strings.Cut(uri, "?")
	list := a.byPath[method+" "+host+path]
	var best *entry
	bestScore := -1.0
	for _, e := range list {
		if s := queryScore(query, e.query); s > bestScore {
			best, bestScore = e, s
		}
	}
	if best == nil {
		return nil, errNoMatch
	}
	return best, nil
}

// ErrNotServing is returned by Begin-style calls of a server that serves
// no replay.
var ErrNotServing = errors.New("this server serves no replay (start it with --replay)")

package har

import (
	"net"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Summary describes what a replay of an archive serves.
type Summary struct {
	Entries int // every entry of the archive
	// Served are the entries a replay answers: http and https URLs with a
	// recorded response (status not 0). Skipped are the others (data:,
	// blob:, ws: and browser-internal URLs, requests that failed or were
	// blocked).
	Served, Skipped int
	// HTTP counts the served entries of cleartext http:// URLs (a replay
	// serves HTTPS only; browsers block or upgrade such sub-resources).
	HTTP int
	// Origins and Hosts are the distinct scheme://host:port and host
	// names of the served entries; Addresses the distinct recorded
	// serverIPAddress values (0 when the archive records none).
	Origins, Hosts, Addresses int
	// Bytes is the body bytes of the served entries as recorded (decoded
	// size), missing ones included.
	Bytes int64
	// Missing counts the served entries whose body the export left out or
	// cut short (Truncated of them), and MissingBytes the bytes missing.
	Missing, Truncated int
	MissingBytes       int64
	// Pages is the number of page loads recorded; a replay loads the
	// first one, whose document is PageURL.
	Pages   int
	PageURL string
}

// Served reports whether a replay answers the entry: an http or https
// URL with a host name (not an IP address, which no name resolution can
// send to the replay) and a final response (status 200 or more; 0 is a
// request that failed or was blocked).
func (e *Entry) Served() bool {
	u, err := url.Parse(e.Request.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return false
	}
	if net.ParseIP(u.Hostname()) != nil {
		return false
	}
	return e.Response.Status >= 200
}

// HasBody reports whether the recorded response carries a body on the
// wire: not for HEAD, 1xx, 204 and 304.
func (e *Entry) HasBody() bool {
	s := e.Response.Status
	return !strings.EqualFold(e.Request.Method, "HEAD") && s >= 200 && s != 204 && s != 304
}

// MissingBytes returns how many body bytes the archive lacks for the
// entry: the recorded size when the body was left out, the difference
// when it was cut short, 0 when it is whole; truncated tells the second
// case.
func (e *Entry) MissingBytes() (missing int64, truncated bool) {
	if !e.HasBody() {
		return 0, false
	}
	c := &e.Response.Content
	size := c.Size
	n, ok := c.BodyLen()
	if !ok {
		if size <= 0 {
			size = e.Response.BodySize // some exporters leave content.size 0
		}
		return max(size, 0), false
	}
	if size > n {
		return size - n, true
	}
	return 0, false
}

// Summarize counts what a replay of the archive serves.
func (h *HAR) Summarize() Summary {
	s := Summary{Entries: len(h.Log.Entries), Pages: len(h.Log.Pages)}
	origins, hosts, addrs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range h.Log.Entries {
		e := &h.Log.Entries[i]
		if !e.Served() {
			s.Skipped++
			continue
		}
		s.Served++
		u, _ := url.Parse(e.Request.URL)
		if u.Scheme == "http" {
			s.HTTP++
		}
		origins[Origin(u)] = true
		hosts[strings.ToLower(u.Hostname())] = true
		if a := NormalizeIP(e.ServerIPAddress); a != "" {
			addrs[a] = true
		}
		size := e.Response.Content.Size
		if n, ok := e.Response.Content.BodyLen(); ok && n > size {
			size = n
		}
		if size > 0 {
			s.Bytes += size
		}
		if m, trunc := e.MissingBytes(); m > 0 {
			s.Missing++
			s.MissingBytes += m
			if trunc {
				s.Truncated++
			}
		}
	}
	s.Origins, s.Hosts, s.Addresses = len(origins), len(hosts), len(addrs)
	if d := h.Document(); d >= 0 {
		s.PageURL = h.Log.Entries[d].Request.URL
	}
	return s
}

// Document returns the index of the entry a replay navigates to: the
// earliest served entry of the first page (or of the archive, when it has
// no pages), or -1 when no entry is served.
func (h *HAR) Document() int {
	page := ""
	if len(h.Log.Pages) > 0 {
		page = h.Log.Pages[0].ID
	}
	best := -1
	var bestT time.Time
	for i := range h.Log.Entries {
		e := &h.Log.Entries[i]
		if !e.Served() || (page != "" && e.Pageref != "" && e.Pageref != page) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, e.StartedDateTime)
		if err != nil {
			// No usable time: the archive's order decides.
			if best < 0 {
				best = i
			}
			continue
		}
		if best < 0 || t.Before(bestT) {
			best, bestT = i, t
		}
	}
	return best
}

// Origin returns u's origin, scheme://host:port with the default port
// written out and the host in lower case.
func Origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return u.Scheme + "://" + h + ":" + port
}

// NormalizeIP returns a recorded serverIPAddress without brackets and
// zone, or "" when there is none.
func NormalizeIP(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimSuffix(s, "]"), "[")
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	return strings.ToLower(s)
}

// SortedEntries returns the indexes of the entries by start time (the
// archive's order for equal or unparsable times).
func (h *HAR) SortedEntries() []int {
	idx := make([]int, len(h.Log.Entries))
	ts := make([]time.Time, len(h.Log.Entries))
	for i := range idx {
		idx[i] = i
		ts[i], _ = time.Parse(time.RFC3339Nano, h.Log.Entries[i].StartedDateTime)
	}
	sort.SliceStable(idx, func(a, b int) bool { return ts[idx[a]].Before(ts[idx[b]]) })
	return idx
}

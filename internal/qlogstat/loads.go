package qlogstat

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Sample is one sample of a run as far as matching logs to it needs: its
// cell's key, iteration, primary value and when it ran (from the start of
// its preparation to the end of its overhead: a browser's connections all
// start in that span).
type Sample struct {
	Key       string
	Iteration int
	Value     float64
	Start     time.Time
	End       time.Time
}

// Load is one sample's connections, from one kind of log (Conn.Vantage
// and Conn.Title: the server's qlog, Firefox's qlog, Chromium's NetLog).
type Load struct {
	Sample Sample
	Source string // e.g. "server quic-go qlog v0.65.0"
	Conns  []*Conn
}

// Source names where a Conn's figures come from: its vantage point and
// its log's title.
func Source(c *Conn) string { return c.Vantage + " " + c.Title }

// Attach matches each connection to the sample whose span holds its start
// (Conn.Start), and returns the loads by sample (in samples' order) and
// source, and the connections no sample holds. A connection without a
// start time is left over.
func Attach(conns []*Conn, samples []Sample) (loads []*Load, left []*Conn) {
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return samples[idx[a]].Start.Before(samples[idx[b]].Start) })
	byKey := map[[2]any]*Load{}
	at := map[*Load]int{}
	for _, c := range conns {
		// the last sample that started at or before the connection
		j := sort.Search(len(idx), func(k int) bool { return samples[idx[k]].Start.After(c.Start) }) - 1
		if c.Start.IsZero() || j < 0 || c.Start.After(samples[idx[j]].End) {
			left = append(left, c)
			continue
		}
		k := [2]any{idx[j], Source(c)}
		l := byKey[k]
		if l == nil {
			l = &Load{Sample: samples[idx[j]], Source: Source(c)}
			byKey[k] = l
			at[l] = idx[j]
			loads = append(loads, l)
		}
		l.Conns = append(l.Conns, c)
	}
	slices.SortStableFunc(loads, func(a, b *Load) int {
		if at[a] != at[b] {
			return at[a] - at[b]
		}
		return compareStrings(a.Source, b.Source)
	})
	return loads, left
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Figures are one load's numbers: the sums (counts) and extremes over its
// connections, and the timing of the connection that carried the most
// requests (the page's main connection).
type Figures map[string]float64

// FigureNames lists the names Figures uses, in the order a report shows
// them, with what each means.
var FigureNames = []struct{ Name, Meaning string }{
	{"conns", "connections"},
	{"requests", "request streams"},
	{"pkts_sent", "packets sent"},
	{"pkts_recv", "packets received"},
	{"acks_recv", "packets with an ACK frame received"},
	{"acks_sent", "packets with an ACK frame sent"},
	{"lost", "packets declared lost by this side"},
	{"spurious", "of which later found not lost (quic-go)"},
	{"loss_burst", "most packets declared lost within 1 ms"},
	{"ptos", "probe timeouts"},
	{"recoveries", "entries into congestion recovery"},
	{"cwnd_min", "smallest congestion window (bytes)"},
	{"cwnd_max", "largest congestion window (bytes)"},
	{"in_flight_max", "most bytes in flight"},
	{"key_updates", "1-RTT key updates"},
	{"dropped", "received packets discarded"},
	{"dropped_span_ms", "from the first to the last discarded packet"},
	{"pn_overlap", "of the discarded: neqo's \"packet number overlap\""},
	{"data_blocked", "DATA_BLOCKED frames (sent + received)"},
	{"stream_data_blocked", "STREAM_DATA_BLOCKED frames (sent + received)"},
	{"max_data", "MAX_DATA frames (sent + received)"},
	{"max_stream_data", "MAX_STREAM_DATA frames (sent + received)"},
	{"peer_max_data", "the peer's initial_max_data"},
	{"peer_max_stream_data", "the peer's initial_max_stream_data_bidi_local (its receive window per request)"},
	{"first_req_ms", "first request"},
	{"last_req_ms", "last request"},
	{"load_end_ms", "last response byte"},
	{"concurrency", "most requests outstanding at once"},
	{"ttfb_med_ms", "median request to first response byte"},
}

// Figures computes a load's figures.
func (l *Load) Figures() Figures {
	f := Figures{}
	var main *Conn
	cwndMin := math.Inf(1)
	for _, c := range l.Conns {
		f["conns"]++
		f["requests"] += float64(len(c.Requests()))
		f["pkts_sent"] += float64(c.PacketsSent)
		f["pkts_recv"] += float64(c.PacketsReceived)
		f["acks_recv"] += float64(c.AcksReceived)
		f["acks_sent"] += float64(c.AcksSent)
		f["lost"] += float64(c.Lost)
		f["spurious"] += float64(c.Spurious)
		f["loss_burst"] = max(f["loss_burst"], float64(c.LossBurst))
		f["ptos"] += float64(c.PTOs)
		f["recoveries"] += float64(c.Recoveries)
		if c.CwndMax > 0 {
			cwndMin = min(cwndMin, float64(c.CwndMin))
		}
		f["cwnd_max"] = max(f["cwnd_max"], float64(c.CwndMax))
		f["in_flight_max"] = max(f["in_flight_max"], float64(c.InFlightMax))
		f["key_updates"] += float64(len(c.KeyUpdates))
		for reason, n := range c.Dropped {
			f["dropped"] += float64(n)
			if strings.Contains(reason, "packet number overlap") {
				f["pn_overlap"] += float64(n)
			}
		}
		if c.DroppedFirst >= 0 {
			f["dropped_span_ms"] = max(f["dropped_span_ms"], c.DroppedLast-c.DroppedFirst)
		}
		f["data_blocked"] += float64(c.DataBlocked.Sent + c.DataBlocked.Received)
		f["stream_data_blocked"] += float64(c.StreamDataBlocked.Sent + c.StreamDataBlocked.Received)
		f["max_data"] += float64(c.MaxData.Sent + c.MaxData.Received)
		f["max_stream_data"] += float64(c.MaxStreamData.Sent + c.MaxStreamData.Received)
		if main == nil || len(c.Requests()) > len(main.Requests()) {
			main = c
		}
	}
	if !math.IsInf(cwndMin, 1) {
		f["cwnd_min"] = cwndMin
	}
	if main != nil {
		f["peer_max_data"] = float64(main.Remote.MaxData)
		f["peer_max_stream_data"] = float64(main.Remote.MaxStreamDataBidiLoc)
		if first, last, end, conc, ttfb := main.Load(); first >= 0 {
			f["first_req_ms"], f["last_req_ms"], f["load_end_ms"] = first, last, end
			f["concurrency"] = float64(conc)
			f["ttfb_med_ms"] = ttfb
		}
	}
	return f
}

// Summary is the distribution of one figure over the loads of a cell.
type Summary struct {
	N                int
	P25, Median, P75 float64
	Min, Max, Mean   float64
	Nonzero          int // loads where the figure is not 0
}

// Summarize returns each figure's distribution over loads.
func Summarize(loads []*Load) map[string]Summary {
	vals := map[string][]float64{}
	for _, l := range loads {
		f := l.Figures()
		for _, n := range FigureNames {
			vals[n.Name] = append(vals[n.Name], f[n.Name])
		}
	}
	out := map[string]Summary{}
	for name, v := range vals {
		out[name] = summary(v)
	}
	return out
}

// SummaryOf returns the distribution of v.
func SummaryOf(v []float64) Summary { return summary(v) }

func summary(v []float64) Summary {
	s := Summary{N: len(v)}
	if len(v) == 0 {
		return s
	}
	v = slices.Clone(v)
	slices.Sort(v)
	s.Min, s.Max = v[0], v[len(v)-1]
	sum := 0.0
	for _, x := range v {
		sum += x
		if x != 0 {
			s.Nonzero++
		}
	}
	s.Mean = sum / float64(len(v))
	s.P25, s.Median, s.P75 = quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)
	return s
}

// quantile of sorted v, linear between order statistics (type 7).
func quantile(v []float64, q float64) float64 {
	h := q * float64(len(v)-1)
	lo := math.Floor(h)
	if int(lo)+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[int(lo)] + (h-lo)*(v[int(lo)+1]-v[int(lo)])
}

// String renders a summary as "median [p25, p75]".
func (s Summary) String() string {
	return fmt.Sprintf("%s [%s, %s]", num(s.Median), num(s.P25), num(s.P75))
}

func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// DiscardLag is how long after the server's first key update (in the
// server's log) the client first discarded a 1-RTT packet (in the
// client's log), by the wall clocks of the two logs' reference times
// (both taken on this machine); ok is false when either is missing. A lag
// of about one one-way delay says that the client discarded the first
// packets protected with the new keys.
func DiscardLag(server, client *Load) (lag float64, ok bool) {
	var ku, drop time.Time
	for _, c := range server.Conns {
		if len(c.KeyUpdates) > 0 && !c.Start.IsZero() {
			t := c.Start.Add(msDuration(c.KeyUpdates[0]))
			if ku.IsZero() || t.Before(ku) {
				ku = t
			}
		}
	}
	for _, c := range client.Conns {
		if c.DroppedFirst >= 0 && !c.Start.IsZero() {
			t := c.Start.Add(msDuration(c.DroppedFirst))
			if drop.IsZero() || t.Before(drop) {
				drop = t
			}
		}
	}
	if ku.IsZero() || drop.IsZero() {
		return 0, false
	}
	return float64(drop.Sub(ku)) / 1e6, true
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * 1e6) }

package program

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
)

// output is the program's record (client.py's docstring).
type output struct {
	Version string `json:"version"`
	Config  struct {
		CongestionControl string  `json:"congestion_control"`
		MaxDatagramSize   int     `json:"max_datagram_size"`
		RcvBufBytes       float64 `json:"rcvbuf_bytes"`
	} `json:"config"`
	StartedUnixNs int64 `json:"started_unix_ns"`
	CPUStart      *struct {
		UserNs int64 `json:"user_ns"`
		SysNs  int64 `json:"sys_ns"`
	} `json:"cpu_start"`
	MeasureStart int64           `json:"measure_start"`
	MeasureEnd   int64           `json:"measure_end"`
	Conns        []connRecord    `json:"conns"`
	Requests     []requestRecord `json:"requests"`
	Qlogs        []string        `json:"qlogs"`
	Error        string          `json:"error"`
}

type connRecord struct {
	Local      string                `json:"local"`
	Remote     string                `json:"remote"`
	Start      int64                 `json:"start"`
	Connected  int64                 `json:"connected"`
	Handshake  int64                 `json:"handshake"`
	Closed     int64                 `json:"closed"`
	Requests   int                   `json:"requests"`
	Negotiated model.Negotiated      `json:"negotiated"`
	Transport  *model.TransportStats `json:"transport"`
}

type requestRecord struct {
	Path           string     `json:"path"`
	Conn           int        `json:"conn"`
	Status         int        `json:"status"`
	Start          int64      `json:"start"`
	Sent           int64      `json:"sent"`
	FirstByte      int64      `json:"first_byte"`
	End            int64      `json:"end"`
	Bytes          int64      `json:"bytes"`
	UploadBytes    int64      `json:"upload_bytes"`
	ServerUploadNs int64      `json:"server_upload_ns"`
	Chunks         [][2]int64 `json:"chunks"`
	Error          string     `json:"error"`
}

// parse checks the program's record out (want requests were asked for, the
// program used cpu in all) and turns it into the FetchResult the built-in
// client would have recorded, and the configuration metrics. A record that
// reports a failure still yields what it measured, with the failure as the
// error.
func parse(name string, out []byte, want int, cpu endpoint.CPUTime) (*endpoint.FetchResult, map[string]float64, error) {
	var o output
	dec := json.NewDecoder(strings.NewReader(string(out)))
	if err := dec.Decode(&o); err != nil {
		return nil, nil, fmt.Errorf("%s client: its output is not a record: %v (%d bytes: %.200q)", name, err, len(out), out)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("%s client: its output holds more than one record", name)
	}
	if o.Version == "" {
		return nil, nil, fmt.Errorf("%s client: its record has no version", name)
	}
	if err := o.check(want); err != nil {
		return nil, nil, fmt.Errorf("%s client: malformed record: %w", name, err)
	}
	fr := &endpoint.FetchResult{
		Proto:        model.ProtoH3,
		Started:      time.Unix(0, o.StartedUnixNs),
		MeasureStart: o.MeasureStart,
		MeasureEnd:   o.MeasureEnd,
	}
	if o.CPUStart != nil && o.CPUStart.UserNs >= 0 && o.CPUStart.SysNs >= 0 {
		// the interpreter's start and imports, before the sample's clock
		cpu.User = max(cpu.User-time.Duration(o.CPUStart.UserNs), 0)
		cpu.Sys = max(cpu.Sys-time.Duration(o.CPUStart.SysNs), 0)
	}
	fr.CPU.ClientUser, fr.CPU.ClientSys = cpu.User, cpu.Sys
	for _, c := range o.Conns {
		ct := endpoint.ConnTiming{
			Local: c.Local, Remote: c.Remote, Start: c.Start, Connected: c.Connected,
			Handshake: c.Handshake, Closed: c.Closed, Requests: c.Requests, Negotiated: c.Negotiated,
		}
		if c.Transport != nil {
			ct.Transport = *c.Transport
			ct.Transport.CongestionAlgo = model.CCName(ct.Transport.CongestionAlgo)
		}
		fr.Conns = append(fr.Conns, ct)
	}
	for _, r := range o.Requests {
		rt := endpoint.RequestTiming{
			Path: r.Path, Conn: r.Conn, Status: r.Status, Start: r.Start, Sent: r.Sent,
			FirstByte: r.FirstByte, End: r.End, Bytes: r.Bytes, UploadBytes: r.UploadBytes,
			ServerUploadNanos: r.ServerUploadNs, Error: r.Error,
		}
		rt.Chunks = make([]endpoint.Chunk, len(r.Chunks))
		for i, ch := range r.Chunks {
			rt.Chunks[i] = endpoint.Chunk{T: ch[0], Bytes: int(ch[1])}
		}
		fr.Requests = append(fr.Requests, rt)
		fr.Bytes += r.Bytes
		fr.UploadBytes += r.UploadBytes
	}
	if len(fr.Conns) > 0 {
		fr.Negotiated = fr.Conns[0].Negotiated
	}
	extra := map[string]float64{}
	if o.Config.RcvBufBytes > 0 {
		extra["client_rcvbuf_bytes"] = o.Config.RcvBufBytes
	}
	if o.Config.MaxDatagramSize > 0 {
		extra["client_max_datagram_bytes"] = float64(o.Config.MaxDatagramSize)
	}
	if o.Error != "" {
		return fr, extra, fmt.Errorf("%s client: %s", name, o.Error)
	}
	for _, c := range fr.Conns {
		if c.Negotiated.ALPN != "h3" {
			return fr, extra, &endpoint.MismatchError{Proto: model.ProtoH3, What: "ALPN", Want: "h3", Got: c.Negotiated.ALPN, Negotiated: c.Negotiated}
		}
	}
	return fr, extra, nil
}

// check validates the record's structure: times, indices, byte counts, and
// for a successful record its completeness.
func (o *output) check(want int) error {
	if len(o.Conns) > 1 {
		return fmt.Errorf("%d connections, want at most 1 (h3 runs every request on one)", len(o.Conns))
	}
	if o.MeasureStart < 0 || o.MeasureEnd < 0 || (o.MeasureEnd > 0 && o.MeasureEnd < o.MeasureStart) {
		return fmt.Errorf("measured part from %d to %d ns", o.MeasureStart, o.MeasureEnd)
	}
	if len(o.Requests) > want {
		return fmt.Errorf("%d requests, want at most %d", len(o.Requests), want)
	}
	for i, c := range o.Conns {
		if c.Start < 0 || c.Connected < 0 || c.Handshake < 0 || c.Closed < 0 {
			return fmt.Errorf("connection %d: negative time", i)
		}
		if o.Error == "" {
			switch {
			case c.Local == "" || c.Connected == 0 || c.Handshake == 0:
				return fmt.Errorf("connection %d: no local address or handshake time", i)
			case c.Transport == nil || c.Transport.Kind != "quic":
				return fmt.Errorf("connection %d: no QUIC transport statistics", i)
			}
		}
	}
	for i, r := range o.Requests {
		if r.Conn < 0 || r.Conn >= len(o.Conns) {
			return fmt.Errorf("request %d: connection %d of %d", i, r.Conn, len(o.Conns))
		}
		if r.Start < 0 || r.Sent < 0 || r.FirstByte < 0 || r.End < 0 || r.Bytes < 0 || r.UploadBytes < 0 {
			return fmt.Errorf("request %d (%s): negative time or byte count", i, r.Path)
		}
		if r.End > 0 && r.End < r.Start {
			return fmt.Errorf("request %d (%s): ends at %d ns before its start at %d ns", i, r.Path, r.End, r.Start)
		}
		var sum int64
		for _, ch := range r.Chunks {
			if ch[0] < 0 || ch[1] <= 0 {
				return fmt.Errorf("request %d (%s): chunk of %d bytes at %d ns", i, r.Path, ch[1], ch[0])
			}
			sum += ch[1]
		}
		if sum != r.Bytes {
			return fmt.Errorf("request %d (%s): chunks sum to %d bytes, the request counts %d", i, r.Path, sum, r.Bytes)
		}
		if o.Error == "" && (r.Start == 0 || r.End == 0 || r.Error != "") {
			return fmt.Errorf("request %d (%s) incomplete in a record without error", i, r.Path)
		}
	}
	if o.Error == "" {
		switch {
		case len(o.Conns) != 1:
			return errors.New("no connection in a record without error")
		case len(o.Requests) != want:
			return fmt.Errorf("%d requests in a record without error, want %d", len(o.Requests), want)
		}
	}
	return nil
}

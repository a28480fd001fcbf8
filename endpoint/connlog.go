package endpoint

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// ConnEvent is a TLS connection the server opened or saw end: Event
// "open" once its TLS handshake (over TCP, or QUIC's) completed, with what
// the handshake did; "close" when it ended (only for connections that
// were opened). ServerConfig.OnConn receives them; `quicbench serve
// --conn-log FILE` writes them as JSON lines. They show, from the server's
// side, whether a client reused a connection or a TLS session: the
// browser isolation tests read them.
type ConnEvent struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // "open" or "close"
	Kind  string    `json:"kind"`  // "tcp" or "quic"
	// Remote is the client's address ("ip:port").
	Remote string `json:"remote"`
	// ALPN is the protocol the handshake negotiated ("h2", "http/1.1",
	// "h3", "qb-raw"); open only.
	ALPN string `json:"alpn,omitempty"`
	// Resumed is true when the handshake resumed an earlier TLS session
	// (a session ticket the client kept); open only.
	Resumed bool `json:"resumed,omitempty"`
	// ZeroRTT is true when the server accepted 0-RTT data (QUIC); open
	// only.
	ZeroRTT bool `json:"zero_rtt,omitempty"`
}

// ConnLog returns a ServerConfig.OnConn that writes each event to w as a
// JSON line, one at a time (write errors are dropped: the log is a
// diagnostic, never the server's business).
func ConnLog(w io.Writer) func(ConnEvent) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(e ConnEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
}

// onConn reports e to ServerConfig.OnConn, if set.
func (s *Server) onConn(e ConnEvent) {
	if s.cfg.OnConn != nil {
		e.Time = time.Now()
		s.cfg.OnConn(e)
	}
}

//! quiche's transport configuration for quicbench, and one connection with
//! its pacing and send queue.

use std::time::{Duration, Instant};

use quiche::CongestionControlAlgorithm;

use crate::pacing::{self, Gate, SendQueue};

/// The quiche release this peer is built with (the workspace's Cargo.lock).
pub const QUICHE_VERSION: &str = env!("QUICHE_VERSION");

/// The version string the peer reports: "quiche 0.x.y".
pub fn version() -> String {
    format!("quiche {QUICHE_VERSION}")
}

/// HTTP/3's ALPN.
pub const ALPN: &[&[u8]] = &[b"h3"];

/// Bidirectional streams a peer may open at once: a page of hundreds of
/// objects requested in parallel.
pub const MAX_STREAMS_BIDI: u64 = 1000;

/// Unidirectional streams (HTTP/3's control and QPACK streams, and a few
/// more a peer may open).
pub const MAX_STREAMS_UNI: u64 = 100;

/// Flow-control window of each unidirectional stream.
pub const UNI_STREAM_WINDOW: u64 = 1 << 20;

/// A congestion controller quiche runs, as a plan names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cc {
    pub algo: CongestionControlAlgorithm,
    /// What runs, in quiche's words: "reno", "cubic" or "bbr2_gcongestion".
    pub name: &'static str,
    /// quiche computes pacing times (SendInfo.at) for it.
    pub quiche_paces: bool,
}

/// The controllers a plan may ask for.
pub const CC_NAMES: &[&str] = &["reno", "cubic", "bbr"];

/// Maps a plan's congestion control ("reno", "cubic" or "bbr") to quiche's:
/// Reno and CUBIC (both with HyStart++, quiche's default), or BBRv2
/// (quiche's bbr2_gcongestion, ported from Google's QUICHE). Anything else
/// is refused.
pub fn congestion_control(name: &str) -> Result<Cc, String> {
    match name {
        "reno" => Ok(Cc {
            algo: CongestionControlAlgorithm::Reno,
            name: "reno",
            quiche_paces: false,
        }),
        "cubic" => Ok(Cc {
            algo: CongestionControlAlgorithm::CUBIC,
            name: "cubic",
            quiche_paces: false,
        }),
        "bbr" => Ok(Cc {
            algo: CongestionControlAlgorithm::Bbr2Gcongestion,
            name: "bbr2_gcongestion",
            quiche_paces: true,
        }),
        _ => Err(format!(
            "congestion control {name:?}: the quiche peer runs reno, cubic or bbr (quiche's bbr2_gcongestion)"
        )),
    }
}

/// The transport settings of a connection.
#[derive(Debug, Clone)]
pub struct Settings {
    pub cc: Cc,
    /// Largest UDP payload sent and accepted (1452 on a 1500-byte MTU).
    pub max_datagram_size: usize,
    /// Connection and per-stream flow-control windows (bytes).
    pub max_data: u64,
    pub max_stream_data: u64,
    /// Idle timeout.
    pub idle_timeout: Duration,
    /// Write TLS secrets (then give each connection a key log writer).
    pub keylog: bool,
}

/// Checks the numbers of `s`.
pub fn validate(s: &Settings) -> Result<(), String> {
    if !(1200..=65527).contains(&s.max_datagram_size) {
        return Err(format!(
            "max_datagram_size {}: want 1200..65527 bytes",
            s.max_datagram_size
        ));
    }
    if s.max_data == 0 || s.max_stream_data == 0 {
        return Err("max_data and max_stream_data must be positive".into());
    }
    if s.max_stream_data > s.max_data {
        return Err(format!(
            "max_stream_data {} exceeds max_data {}",
            s.max_stream_data, s.max_data
        ));
    }
    if s.max_data > (1 << 62) {
        return Err(format!("max_data {}: above QUIC's 2^62", s.max_data));
    }
    Ok(())
}

/// quiche's configuration for `s`. Flow-control windows are fixed at the
/// configured values (quiche's auto-tuning may not grow them beyond).
pub fn config(s: &Settings) -> Result<quiche::Config, String> {
    let mut c =
        quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| format!("quiche config: {e}"))?;
    apply(&mut c, s)?;
    Ok(c)
}

/// Applies `s` to a quiche configuration (one made with a TLS context of
/// the caller's, for instance).
pub fn apply(c: &mut quiche::Config, s: &Settings) -> Result<(), String> {
    validate(s)?;
    c.set_application_protos(ALPN)
        .map_err(|e| format!("quiche ALPN: {e}"))?;
    c.set_cc_algorithm(s.cc.algo);
    c.enable_hystart(true);
    c.enable_pacing(true);
    c.set_max_send_udp_payload_size(s.max_datagram_size);
    c.set_max_recv_udp_payload_size(s.max_datagram_size);
    c.discover_pmtu(false);
    c.set_initial_max_data(s.max_data);
    c.set_max_connection_window(s.max_data);
    c.set_initial_max_stream_data_bidi_local(s.max_stream_data);
    c.set_initial_max_stream_data_bidi_remote(s.max_stream_data);
    c.set_max_stream_window(s.max_stream_data);
    c.set_initial_max_stream_data_uni(UNI_STREAM_WINDOW);
    c.set_initial_max_streams_bidi(MAX_STREAMS_BIDI);
    c.set_initial_max_streams_uni(MAX_STREAMS_UNI);
    c.set_max_idle_timeout(s.idle_timeout.as_millis() as u64);
    c.set_disable_active_migration(true);
    if s.keylog {
        c.log_keys();
    }
    Ok(())
}

/// Datagrams a connection may hold built but not yet sent.
pub const MAX_QUEUED: usize = 256;

/// One QUIC connection, its pacing and its built datagrams.
pub struct Wire {
    pub conn: quiche::Connection,
    pub queue: SendQueue,
    pub gate: Gate,
    /// When the gate allows building again (None: not waiting).
    pub build_at: Option<Instant>,
    buf: Vec<u8>,
}

impl Wire {
    pub fn new(conn: quiche::Connection, cc: &Cc, max_datagram_size: usize, now: Instant) -> Wire {
        let log = pacing::SendLog::from_env(conn.trace_id());
        Wire {
            conn,
            queue: SendQueue::with_log(log),
            gate: Gate::new(cc.quiche_paces, max_datagram_size, now),
            build_at: None,
            buf: vec![0; max_datagram_size.max(1200)],
        }
    }

    /// Builds datagrams while the pacer allows and quiche has something to
    /// send, and queues them with their release times. Returns how many it
    /// built.
    pub fn build(&mut self, now: Instant) -> usize {
        self.build_at = None;
        if let Gate::App(b) = &mut self.gate {
            if let Some(p) = self.conn.path_stats().next() {
                let srtt = if p.min_rtt.is_some() {
                    p.rtt
                } else {
                    Duration::ZERO
                };
                b.set_window(p.cwnd, srtt, now);
            }
        }
        let mut n = 0;
        while self.queue.len() < MAX_QUEUED {
            let wait = match &mut self.gate {
                Gate::Off => None,
                Gate::Quiche => {
                    let next = self.conn.get_next_release_time().and_then(|d| d.time(now));
                    pacing::quiche_gate(next, self.conn.max_release_into_future(), now)
                }
                Gate::App(b) => b.wait_until(now),
            };
            if let Some(t) = wait {
                self.build_at = Some(t);
                break;
            }
            match self.conn.send(&mut self.buf) {
                Ok((len, info)) => {
                    if let Gate::App(b) = &mut self.gate {
                        b.on_sent(len, now);
                    }
                    let at = if matches!(self.gate, Gate::Off) {
                        now
                    } else {
                        info.at.max(now)
                    };
                    self.queue.push(at, self.buf[..len].to_vec(), info.to);
                    n += 1;
                }
                Err(quiche::Error::Done) => break,
                Err(e) => {
                    eprintln!("quiche peer: {}: send: {e}", self.conn.trace_id());
                    let _ = self.conn.close(false, 0x1, b"send failed");
                    break;
                }
            }
        }
        n
    }

    /// When this connection next needs the loop: quiche's timer, its next
    /// datagram's release time, or the pacer's next building time.
    pub fn deadline(&self) -> Option<Instant> {
        pacing::earliest([
            self.conn.timeout_instant(),
            self.queue.next_release(),
            self.build_at,
        ])
    }

    /// A line for standard error on how well the connection was paced.
    pub fn pacing_report(&self) -> String {
        let q = &self.queue;
        let mean = if q.sent > 0 {
            q.late_total / q.sent as u32
        } else {
            Duration::ZERO
        };
        format!(
            "pacer {}: {} datagrams, late by {:.1} us on average, {:.1} us at most",
            self.gate.name(),
            q.sent,
            mean.as_secs_f64() * 1e6,
            q.late_max.as_secs_f64() * 1e6
        )
    }

    /// Runs quiche's timer if it is due.
    pub fn on_timer(&mut self, now: Instant) {
        if let Some(t) = self.conn.timeout_instant() {
            if t <= now {
                self.conn.on_timeout();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            cc: congestion_control("cubic").unwrap(),
            max_datagram_size: 1452,
            max_data: 15 << 20,
            max_stream_data: 6 << 20,
            idle_timeout: Duration::from_secs(30),
            keylog: false,
        }
    }

    #[test]
    fn cc_names_map_to_quiche() {
        let r = congestion_control("reno").unwrap();
        assert_eq!(
            (r.algo, r.name, r.quiche_paces),
            (CongestionControlAlgorithm::Reno, "reno", false)
        );
        let c = congestion_control("cubic").unwrap();
        assert_eq!(
            (c.algo, c.name, c.quiche_paces),
            (CongestionControlAlgorithm::CUBIC, "cubic", false)
        );
        let b = congestion_control("bbr").unwrap();
        assert_eq!(
            (b.algo, b.name, b.quiche_paces),
            (
                CongestionControlAlgorithm::Bbr2Gcongestion,
                "bbr2_gcongestion",
                true
            )
        );
        for bad in ["", "newreno", "BBR", "bbr1", "vegas"] {
            let e = congestion_control(bad).unwrap_err();
            assert!(e.contains("reno, cubic or bbr"), "{bad}: {e}");
        }
    }

    #[test]
    fn settings_are_validated() {
        assert!(config(&settings()).is_ok());
        let mut s = settings();
        s.max_datagram_size = 1100;
        assert!(validate(&s).unwrap_err().contains("max_datagram_size 1100"));
        let mut s = settings();
        s.max_stream_data = 16 << 20;
        assert!(validate(&s).unwrap_err().contains("exceeds max_data"));
        let mut s = settings();
        s.max_data = 0;
        assert!(validate(&s).is_err());
    }

    #[test]
    fn version_names_quiche() {
        assert!(version().starts_with("quiche 0."), "{}", version());
        assert_ne!(QUICHE_VERSION, "unknown");
    }
}

//! The server's standard output: one JSON object per line, as server.py
//! prints them and `endpoint/peer.go` (readAioquic) reads them.
//!
//! ```text
//! {"ready":{"version":"quinn 0.11.12","port":4433,"cc":"cubic","max_datagram_size":1452,"rcvbuf":14680064}}
//! {"open":"10.0.0.1:53211"}
//! {"end":"10.0.0.1:53211","stats":{"cc":"cubic","srtt_ms":20.3,...}}
//! ```
//!
//! The wrapper may ask for an open connection's statistics with the line
//! `{"stats":"10.0.0.1:53211"}` on standard input (when the client's
//! CONNECTION_CLOSE was lost, the connection stays open until its idle
//! timeout); the server answers `{"live":"10.0.0.1:53211","stats":{...}}`,
//! or `{"live":"10.0.0.1:53211"}` when it has no such connection.
//!
//! Each line is written whole and flushed at once, from any thread.

use std::io::Write;

use serde::Serialize;

/// The `ready` line's object: what the server really runs with.
#[derive(Debug, Clone, Serialize)]
pub struct Ready {
    /// The stack and its version ("quinn 0.11.12").
    pub version: String,
    pub port: u16,
    /// The congestion control that runs.
    pub cc: String,
    pub max_datagram_size: u64,
    /// SO_RCVBUF as the kernel reports it.
    pub rcvbuf: u64,
}

/// A connection's statistics at its end (server.py's read_stats keys).
/// Values the stack does not expose are -1 (the Go side maps them to
/// `model.NotMeasured` where it can), and say so in the stack's README.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerStats {
    pub cc: String,
    pub srtt_ms: f64,
    pub rttvar_ms: f64,
    pub min_rtt_ms: f64,
    pub cwnd: i64,
    pub ssthresh: i64,
    pub bytes_in_flight: i64,
    pub packets_sent: i64,
    pub packets_lost: i64,
    pub bytes_lost: i64,
    pub pto_count: i64,
    /// Loss-triggered window reductions, when the stack counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_events: Option<i64>,
}

#[derive(Serialize)]
struct ReadyLine<'a> {
    ready: &'a Ready,
}
#[derive(Serialize)]
struct OpenLine<'a> {
    open: &'a str,
}
#[derive(Serialize)]
struct EndLine<'a> {
    end: &'a str,
    stats: &'a ServerStats,
}
#[derive(Serialize)]
struct LiveLine<'a> {
    live: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<&'a ServerStats>,
}
#[derive(serde::Deserialize)]
struct StatsRequest {
    stats: String,
}

fn emit<T: Serialize>(v: &T) {
    let mut line = serde_json::to_vec(v).expect("serialising an event");
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    // The wrapper reads these lines; if it is gone there is no one to tell.
    let _ = out.write_all(&line);
    let _ = out.flush();
}

/// Prints `{"ready": ...}`.
pub fn ready(r: &Ready) {
    emit(&ReadyLine { ready: r });
}

/// Prints `{"open": ADDR}`: a connection from ADDR ("ip:port") started.
pub fn open(addr: &str) {
    emit(&OpenLine { open: addr });
}

/// Prints `{"end": ADDR, "stats": ...}`: the connection from ADDR ended.
pub fn end(addr: &str, stats: &ServerStats) {
    emit(&EndLine { end: addr, stats });
}

/// Prints `{"live": ADDR, "stats": ...}`: the statistics of the open
/// connection from ADDR, or `{"live": ADDR}` when there is none.
pub fn live(addr: &str, stats: Option<&ServerStats>) {
    emit(&LiveLine { live: addr, stats });
}

/// The address a stats line of the wrapper asks for (`{"stats": ADDR}`),
/// or None for any other line.
pub fn stats_request(line: &str) -> Option<String> {
    serde_json::from_str::<StatsRequest>(line.trim()).ok().map(|r| r.stats)
}

/// The JSON of the `live` line (for tests).
pub fn live_line(addr: &str, stats: Option<&ServerStats>) -> String {
    serde_json::to_string(&LiveLine { live: addr, stats }).expect("serialising an event")
}

/// The JSON of the `end` line (for tests and self-checks).
pub fn end_line(addr: &str, stats: &ServerStats) -> String {
    serde_json::to_string(&EndLine { end: addr, stats }).expect("serialising an event")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_line_has_server_py_s_keys() {
        let s = ServerStats { cc: "cubic".into(), cwnd: 12000, pto_count: -1, ..Default::default() };
        let v: serde_json::Value = serde_json::from_str(&end_line("1.2.3.4:5", &s)).unwrap();
        assert_eq!(v["end"], "1.2.3.4:5");
        for k in [
            "cc",
            "srtt_ms",
            "rttvar_ms",
            "min_rtt_ms",
            "cwnd",
            "ssthresh",
            "bytes_in_flight",
            "packets_sent",
            "packets_lost",
            "bytes_lost",
            "pto_count",
        ] {
            assert!(v["stats"].get(k).is_some(), "{k}");
        }
        assert!(v["stats"].get("congestion_events").is_none());
    }

    #[test]
    fn stats_requests_and_live_answers() {
        assert_eq!(stats_request("{\"stats\":\"10.0.0.1:5\"}\n").as_deref(), Some("10.0.0.1:5"));
        assert_eq!(stats_request("{\"quit\":true}"), None);
        assert_eq!(stats_request("not json"), None);
        let s = ServerStats { cc: "reno".into(), srtt_ms: 20.5, ..Default::default() };
        let v: serde_json::Value = serde_json::from_str(&live_line("10.0.0.1:5", Some(&s))).unwrap();
        assert_eq!(v["live"], "10.0.0.1:5");
        assert_eq!(v["stats"]["srtt_ms"], 20.5);
        let v: serde_json::Value = serde_json::from_str(&live_line("10.0.0.1:5", None)).unwrap();
        assert!(v.get("stats").is_none());
    }
}

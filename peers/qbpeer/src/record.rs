//! The client's record (one JSON object on stdout), as client.py prints
//! it and `peers/aioquic/parse.go` reads it, with `version` in place of
//! `aioquic_version`. Times are nanoseconds from the sample's start on a
//! monotonic clock ([`Clock`]).

use std::time::Instant;

use serde::Serialize;

use crate::sys::CpuTime;

/// `model.NotMeasured`: a count the stack does not report.
pub const NOT_MEASURED: i64 = -1;

/// The sample's clock: nanoseconds since it was made.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    t0: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock { t0: Instant::now() }
    }
    /// Nanoseconds since the start (at least 1, so that 0 keeps meaning
    /// "did not happen" in the record).
    pub fn now(&self) -> i64 {
        (self.t0.elapsed().as_nanos() as i64).max(1)
    }
    /// The instant `at` on this clock.
    pub fn at(&self, at: Instant) -> i64 {
        (at.saturating_duration_since(self.t0).as_nanos() as i64).max(1)
    }
    pub fn origin(&self) -> Instant {
        self.t0
    }
}

/// The whole record.
#[derive(Debug, Default, Serialize)]
pub struct Record {
    /// The stack and its version, e.g. "quinn 0.11.12".
    pub version: String,
    pub config: RecordConfig,
    pub measure_start: i64,
    pub measure_end: i64,
    pub conns: Vec<ConnRecord>,
    pub requests: Vec<RequestRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_unix_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_start: Option<CpuStart>,
    /// qlog files written (only when the request named a qlog_dir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qlogs: Option<Vec<String>>,
    /// Why the sample failed; absent on success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The CPU time the process had used when the sample's clock started.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct CpuStart {
    pub user_ns: i64,
    pub sys_ns: i64,
}

impl From<CpuTime> for CpuStart {
    fn from(c: CpuTime) -> Self {
        CpuStart { user_ns: c.user_ns, sys_ns: c.sys_ns }
    }
}

/// What the client ran with.
#[derive(Debug, Default, Serialize)]
pub struct RecordConfig {
    pub congestion_control: String,
    pub max_datagram_size: u64,
    pub max_data: u64,
    pub max_stream_data: u64,
    pub rcvbuf_requested: u64,
    /// SO_RCVBUF as the kernel reports it (twice the usable size).
    pub rcvbuf_bytes: u64,
}

/// One connection (`endpoint.ConnTiming`).
#[derive(Debug, Default, Serialize)]
pub struct ConnRecord {
    pub local: String,
    pub remote: String,
    pub start: i64,
    pub connected: i64,
    pub handshake: i64,
    pub closed: i64,
    /// Requests completed on it.
    pub requests: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<Negotiated>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportStats>,
}

/// What the handshake negotiated (`model.Negotiated`'s Go field names).
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Negotiated {
    #[serde(rename = "ALPN")]
    pub alpn: String,
    #[serde(rename = "HTTPVersion")]
    pub http_version: String,
    #[serde(rename = "TLSVersion")]
    pub tls_version: String,
    pub cipher: String,
    #[serde(rename = "QUICVersion")]
    pub quic_version: String,
    pub resumed: bool,
    #[serde(rename = "ZeroRTT")]
    pub zero_rtt: bool,
}

impl Negotiated {
    /// HTTP/3 over QUIC v1 with TLS 1.3 and the given ALPN and cipher suite
    /// (IANA name, e.g. "TLS_AES_128_GCM_SHA256").
    pub fn h3(alpn: &str, cipher: &str) -> Negotiated {
        Negotiated {
            alpn: alpn.to_string(),
            http_version: if alpn == "h3" { "HTTP/3.0".into() } else { String::new() },
            tls_version: "TLS 1.3".into(),
            cipher: cipher.to_string(),
            quic_version: "v1".into(),
            resumed: false,
            zero_rtt: false,
        }
    }
}

/// A connection's transport statistics with `model.TransportStats`' Go
/// field names (the QUIC meanings of docs/metrics.md), plus
/// `latest_rtt_ms` and `bytes_in_flight` as client.py adds them. Counts a
/// stack does not report are [`NOT_MEASURED`].
#[derive(Debug, Default, Clone, Serialize)]
pub struct TransportStats {
    #[serde(rename = "Kind")]
    pub kind: String,
    #[serde(rename = "Side")]
    pub side: String,
    #[serde(rename = "CongestionAlgo")]
    pub congestion_algo: String,
    #[serde(rename = "SmoothedRTTms")]
    pub smoothed_rtt_ms: f64,
    #[serde(rename = "RTTVarms")]
    pub rtt_var_ms: f64,
    #[serde(rename = "MinRTTms")]
    pub min_rtt_ms: f64,
    #[serde(rename = "CwndBytes")]
    pub cwnd_bytes: i64,
    #[serde(rename = "SsthreshBytes")]
    pub ssthresh_bytes: i64,
    #[serde(rename = "PacketsSent")]
    pub packets_sent: i64,
    #[serde(rename = "PacketsLost")]
    pub packets_lost: i64,
    #[serde(rename = "Retransmits")]
    pub retransmits: i64,
    #[serde(rename = "BytesRetransmitted")]
    pub bytes_retransmitted: i64,
    #[serde(rename = "DeliveryRateBps")]
    pub delivery_rate_bps: i64,
    #[serde(rename = "CongestionEvents")]
    pub congestion_events: i64,
    #[serde(rename = "PTOCount")]
    pub pto_count: i64,
    #[serde(rename = "CongestionStateChanges")]
    pub congestion_state_changes: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_rtt_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_in_flight: Option<i64>,
}

/// One request (`endpoint.RequestTiming`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct RequestRecord {
    pub path: String,
    pub conn: usize,
    pub status: u16,
    /// Request headers handed to the stack.
    pub start: i64,
    /// Request (and its body) fully handed to the stack.
    pub sent: i64,
    /// The response headers (or the first body byte, whichever is first).
    pub first_byte: i64,
    /// The end of the response body.
    pub end: i64,
    pub bytes: u64,
    pub upload_bytes: u64,
    /// The server's upload time (from /upload's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_upload_ns: Option<i64>,
    /// [time, bytes] of every piece of body the stack delivered.
    pub chunks: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RequestRecord {
    pub fn new(path: &str, conn: usize) -> RequestRecord {
        RequestRecord { path: path.to_string(), conn, ..Default::default() }
    }

    /// Records `n` body bytes delivered at time `t`.
    pub fn chunk(&mut self, t: i64, n: usize) {
        if n == 0 {
            return;
        }
        self.chunks.push([t, n as i64]);
        self.bytes += n as u64;
        if self.first_byte == 0 {
            self.first_byte = t;
        }
    }

    /// Records the response headers at time `t`.
    pub fn headers(&mut self, t: i64, status: u16) {
        self.status = status;
        if self.first_byte == 0 {
            self.first_byte = t;
        }
    }

    /// The checks client.py makes once a response ended: a 2xx status, a
    /// body as long as its Content-Length, and for an upload to /upload
    /// the server's report of every byte (`body` is the response body,
    /// kept for uploads). Sets `server_upload_ns`; clears `end` on a
    /// truncated body.
    pub fn check(&mut self, content_length: Option<u64>, body: &[u8]) -> Result<(), String> {
        if !(200..=299).contains(&self.status) {
            return Err(format!("h3 {}: status {}", self.path, self.status));
        }
        if let Some(n) = content_length {
            if self.bytes != n {
                self.end = 0;
                return Err(format!("h3 {}: truncated body: {} of {} bytes", self.path, self.bytes, n));
            }
        }
        if self.upload_bytes > 0 && self.path.starts_with("/upload") {
            #[derive(serde::Deserialize)]
            struct Report {
                bytes: u64,
                nanos: i64,
            }
            let rep: Report = serde_json::from_slice(body).map_err(|e| {
                format!("/upload answered {:?}: {e}", String::from_utf8_lossy(&body[..body.len().min(200)]))
            })?;
            if rep.bytes != self.upload_bytes {
                return Err(format!("server received {} of {} upload bytes", rep.bytes, self.upload_bytes));
            }
            self.server_upload_ns = Some(rep.nanos);
        }
        Ok(())
    }
}

/// The error of a request that made no progress for `limit` seconds:
/// "first byte" before any response byte, "idle" after.
pub fn timeout_error(path: &str, first_byte_seen: bool, limit: f64) -> String {
    let phase = if first_byte_seen { "idle" } else { "first byte" };
    format!("h3 {path}: timeout ({phase}, {limit}s without progress)")
}

/// Every `*.qlog` and `*.sqlog` file in `dir`, sorted, as paths.
pub fn list_qlogs(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("qlog" | "sqlog")))
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_json_uses_go_s_names() {
        let mut r = Record { version: "x 1".into(), ..Default::default() };
        r.conns.push(ConnRecord {
            negotiated: Some(Negotiated::h3("h3", "TLS_AES_128_GCM_SHA256")),
            transport: Some(TransportStats { kind: "quic".into(), pto_count: NOT_MEASURED, ..Default::default() }),
            ..Default::default()
        });
        let mut rq = RequestRecord::new("/bytes/5", 0);
        rq.headers(10, 200);
        rq.chunk(12, 5);
        r.requests.push(rq);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["version"], "x 1");
        assert!(v.get("error").is_none() && v.get("qlogs").is_none());
        let n = &v["conns"][0]["negotiated"];
        assert_eq!((n["ALPN"].as_str(), n["HTTPVersion"].as_str()), (Some("h3"), Some("HTTP/3.0")));
        assert_eq!((n["TLSVersion"].as_str(), n["QUICVersion"].as_str()), (Some("TLS 1.3"), Some("v1")));
        assert_eq!(n["ZeroRTT"], false);
        let t = &v["conns"][0]["transport"];
        for k in [
            "Kind",
            "Side",
            "CongestionAlgo",
            "SmoothedRTTms",
            "RTTVarms",
            "MinRTTms",
            "CwndBytes",
            "SsthreshBytes",
            "PacketsSent",
            "PacketsLost",
            "Retransmits",
            "BytesRetransmitted",
            "DeliveryRateBps",
            "CongestionEvents",
            "PTOCount",
            "CongestionStateChanges",
        ] {
            assert!(t.get(k).is_some(), "{k} missing");
        }
        assert_eq!(t["PTOCount"], -1);
        assert_eq!(v["requests"][0]["chunks"], serde_json::json!([[12, 5]]));
        assert_eq!(v["requests"][0]["first_byte"], 10);
    }

    #[test]
    fn request_checks() {
        let mut r = RequestRecord::new("/bytes/10", 0);
        r.headers(1, 404);
        assert_eq!(r.check(None, b"").unwrap_err(), "h3 /bytes/10: status 404");
        let mut r = RequestRecord::new("/bytes/10", 0);
        r.headers(1, 200);
        r.chunk(2, 4);
        r.end = 3;
        assert_eq!(r.check(Some(10), b"").unwrap_err(), "h3 /bytes/10: truncated body: 4 of 10 bytes");
        assert_eq!(r.end, 0);
        let mut u = RequestRecord::new("/upload", 0);
        u.headers(1, 200);
        u.upload_bytes = 100;
        assert!(u.check(None, b"{\"bytes\":100,\"nanos\":7}\n").is_ok());
        assert_eq!(u.server_upload_ns, Some(7));
        u.upload_bytes = 101;
        assert_eq!(
            u.check(None, b"{\"bytes\":100,\"nanos\":7}").unwrap_err(),
            "server received 100 of 101 upload bytes"
        );
        assert!(u.check(None, b"nope").unwrap_err().starts_with("/upload answered \"nope\""));
        assert_eq!(timeout_error("/x", false, 15.0), "h3 /x: timeout (first byte, 15s without progress)");
        assert_eq!(timeout_error("/x", true, 2.5), "h3 /x: timeout (idle, 2.5s without progress)");
    }
}

//! What `qb-quinn-server` and `qb-quinn-client` share: quinn's transport
//! configuration from quicbench's settings, congestion control selection
//! and identification, TLS set-up (certificates, key log, the negotiated
//! cipher suite), per-connection qlog files that also feed the statistics,
//! and the mapping of quinn's statistics onto quicbench's keys.
//!
//! See README.md for what quinn exposes and what it does not.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn::congestion::{Bbr, BbrConfig, Controller, Cubic, CubicConfig, NewReno, NewRenoConfig};
use quinn::{IdleTimeout, MtuDiscoveryConfig, QlogConfig, QlogStream, TransportConfig, VarInt};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use qbpeer::events::ServerStats;
use qbpeer::record::{TransportStats, NOT_MEASURED};
use qbpeer::sys::KeyLogFile;

pub mod check;
pub mod client;
pub mod fetch;
pub mod server;

/// Versions of the crates this build runs (from peers/Cargo.lock).
pub const QUINN_VERSION: &str = env!("QB_QUINN_VERSION");
pub const QUINN_PROTO_VERSION: &str = env!("QB_QUINN_PROTO_VERSION");
pub const H3_VERSION: &str = env!("QB_H3_VERSION");
pub const H3_QUINN_VERSION: &str = env!("QB_H3_QUINN_VERSION");
pub const RUSTLS_VERSION: &str = env!("QB_RUSTLS_VERSION");

/// The version quicbench records: "quinn 0.11.12".
pub fn version() -> String {
    format!("quinn {QUINN_VERSION}")
}

/// Every component's version, as `--version` and `--check` print them.
pub fn versions_json() -> serde_json::Value {
    serde_json::json!({
        "version": version(),
        "quinn": QUINN_VERSION,
        "quinn_proto": QUINN_PROTO_VERSION,
        "h3": H3_VERSION,
        "h3_quinn": H3_QUINN_VERSION,
        "rustls": RUSTLS_VERSION,
    })
}

/// The congestion controls quinn ships, by quicbench's names.
pub const CC_NAMES: [&str; 3] = ["reno", "cubic", "bbr"];
/// quinn's default (and the one an empty `cc` selects).
pub const DEFAULT_CC: &str = "cubic";

/// A congestion controller quinn can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    /// `quinn::congestion::NewReno` (RFC 9002's NewReno).
    Reno,
    /// `quinn::congestion::Cubic` (RFC 8312, quinn's default).
    Cubic,
    /// `quinn::congestion::Bbr` (BBRv1, "experimental" in quinn's docs).
    Bbr,
}

impl Cc {
    /// The controller named `name` ("" = Cubic); other names are refused.
    pub fn from_name(field: &str, name: &str) -> Result<Cc, String> {
        Ok(match qbpeer::config::check_cc(field, name, &CC_NAMES, DEFAULT_CC)?.as_str() {
            "reno" => Cc::Reno,
            "bbr" => Cc::Bbr,
            _ => Cc::Cubic,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Cc::Reno => "reno",
            Cc::Cubic => "cubic",
            Cc::Bbr => "bbr",
        }
    }

    fn factory(self) -> Arc<dyn quinn::congestion::ControllerFactory + Send + Sync> {
        match self {
            Cc::Reno => Arc::new(NewRenoConfig::default()),
            Cc::Cubic => Arc::new(CubicConfig::default()),
            Cc::Bbr => Arc::new(BbrConfig::default()),
        }
    }
}

/// The name of the controller that really runs, found by its type.
pub fn identify_cc(controller: Box<dyn Controller>) -> &'static str {
    let any = controller.into_any();
    if any.is::<NewReno>() {
        "reno"
    } else if any.is::<Cubic>() {
        "cubic"
    } else if any.is::<Bbr>() {
        "bbr"
    } else {
        "unknown"
    }
}

/// quicbench's transport settings for one connection.
#[derive(Debug, Clone, Copy)]
pub struct Transport {
    pub cc: Cc,
    /// Largest UDP payload: the initial MTU and MTU discovery's upper bound.
    pub datagram_size: u16,
    /// Connection and stream flow-control windows (what we let the peer send).
    pub max_data: u64,
    pub max_stream_data: u64,
    pub idle_timeout: Duration,
    /// Concurrent bidirectional streams the peer may open.
    pub max_streams: u32,
}

impl Transport {
    /// quinn's TransportConfig for these settings, writing qlog to `qlog`.
    ///
    /// Datagrams: quinn starts at `initial_mtu` (1200 by default) and
    /// probes up to MTU discovery's upper bound (1452 by default, like
    /// quic-go). Both are set to `datagram_size`, so every packet of a
    /// connection is full-size from the start on a path that carries it
    /// (the testbed's 1500-byte MTU); discovery stays on for its black
    /// hole detection, which falls back to 1200 on a path that does not.
    pub fn config(&self, qlog: Option<QlogStream>) -> TransportConfig {
        let mut t = TransportConfig::default();
        t.congestion_controller_factory(self.cc.factory());
        t.stream_receive_window(varint(self.max_stream_data));
        t.receive_window(varint(self.max_data));
        // How much unacknowledged data we hold for the peer: as much as
        // its connection window lets us send (quinn's default is 10 MB).
        t.send_window(self.max_data);
        t.initial_mtu(self.datagram_size);
        let mut mtu = MtuDiscoveryConfig::default();
        mtu.upper_bound(self.datagram_size);
        t.mtu_discovery_config(Some(mtu));
        t.max_concurrent_bidi_streams(VarInt::from_u32(self.max_streams));
        t.max_concurrent_uni_streams(VarInt::from_u32(100));
        let idle = IdleTimeout::try_from(self.idle_timeout).unwrap_or(IdleTimeout::from(VarInt::from_u32(600_000)));
        t.max_idle_timeout(Some(idle));
        t.qlog_stream(qlog);
        t
    }

    /// The endpoint configuration: the largest UDP payload we accept
    /// (the max_udp_payload_size transport parameter).
    pub fn endpoint_config(&self) -> quinn::EndpointConfig {
        let mut e = quinn::EndpointConfig::default();
        // Never fails for 1200..=65527, which the config checks.
        let _ = e.max_udp_payload_size(self.datagram_size);
        e
    }
}

fn varint(v: u64) -> VarInt {
    VarInt::from_u64(v).unwrap_or(VarInt::MAX)
}

/// A rustls key logger writing the NSS key log file.
#[derive(Debug)]
pub struct KeyLog(pub Arc<KeyLogFile>);

impl rustls::KeyLog for KeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0.log(label, client_random, secret);
    }
    fn will_log(&self, _label: &str) -> bool {
        true
    }
}

/// Opens the key log file `path` ("" = none) as a rustls KeyLog.
pub fn keylog(path: &str) -> Result<Option<Arc<dyn rustls::KeyLog>>, String> {
    if path.is_empty() {
        return Ok(None);
    }
    let f = KeyLogFile::open(Path::new(path)).map_err(|e| format!("keylog {path}: {e}"))?;
    Ok(Some(Arc::new(KeyLog(Arc::new(f)))))
}

/// Reads a PEM certificate chain and its private key.
pub fn load_cert(cert: &Path, key: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("cert {}: no certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("key {}: {e}", key.display()))?;
    Ok((chain, key))
}

/// The roots to verify a server with: the CA of `ca_pem`, or the system's
/// bundle (/etc/ssl/certs/ca-certificates.crt) when it is empty.
pub fn root_store(ca_pem: &str) -> Result<rustls::RootCertStore, String> {
    let pem = if ca_pem.is_empty() {
        const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
        std::fs::read(BUNDLE).map_err(|e| format!("no ca_pem given and {BUNDLE}: {e}"))?
    } else {
        ca_pem.as_bytes().to_vec()
    };
    let mut roots = rustls::RootCertStore::empty();
    let mut n = 0;
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| format!("ca_pem: {e}"))?;
        roots.add(c).map_err(|e| format!("ca_pem: {e}"))?;
        n += 1;
    }
    if n == 0 {
        return Err("ca_pem: no certificate in it".into());
    }
    Ok(roots)
}

/// The cipher suite whose QUIC packet keys were made last (0 = none): the
/// negotiated one once a handshake completed (Initial keys are always
/// AES-128-GCM; Handshake and 1-RTT keys use the negotiated suite). One
/// value per process: the client runs one connection.
static LAST_SUITE: AtomicU16 = AtomicU16::new(0);

/// A QUIC packet protection algorithm that notes its suite when used.
struct SuiteWitness {
    inner: &'static dyn rustls::quic::Algorithm,
    suite: u16,
}

impl rustls::quic::Algorithm for SuiteWitness {
    fn packet_key(
        &self,
        key: rustls::crypto::cipher::AeadKey,
        iv: rustls::crypto::cipher::Iv,
    ) -> Box<dyn rustls::quic::PacketKey> {
        LAST_SUITE.store(self.suite, Ordering::Relaxed);
        self.inner.packet_key(key, iv)
    }
    fn header_protection_key(
        &self,
        key: rustls::crypto::cipher::AeadKey,
    ) -> Box<dyn rustls::quic::HeaderProtectionKey> {
        self.inner.header_protection_key(key)
    }
    fn aead_key_len(&self) -> usize {
        self.inner.aead_key_len()
    }
    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

/// ring's provider with TLS 1.3 suites whose QUIC algorithms note their
/// use, so that the client can say which suite was negotiated (neither
/// quinn nor rustls' QUIC API exposes it). The suites and their order are
/// ring's own; only TLS 1.3 suites (QUIC has no other).
pub fn witnessed_provider() -> CryptoProvider {
    let base = rustls::crypto::ring::default_provider();
    let mut suites = Vec::new();
    for s in &base.cipher_suites {
        let Some(t) = s.tls13() else { continue };
        let Some(quic) = t.quic else { continue };
        let witness: &'static SuiteWitness =
            Box::leak(Box::new(SuiteWitness { inner: quic, suite: u16::from(t.common.suite) }));
        let suite: &'static rustls::Tls13CipherSuite = Box::leak(Box::new(rustls::Tls13CipherSuite {
            common: rustls::crypto::CipherSuiteCommon {
                suite: t.common.suite,
                hash_provider: t.common.hash_provider,
                confidentiality_limit: t.common.confidentiality_limit,
            },
            hkdf_provider: t.hkdf_provider,
            aead_alg: t.aead_alg,
            quic: Some(witness),
        }));
        suites.push(rustls::SupportedCipherSuite::Tls13(suite));
    }
    CryptoProvider { cipher_suites: suites, ..base }
}

/// The IANA name of the suite [`witnessed_provider`] saw last ("" = none).
pub fn negotiated_suite() -> String {
    match LAST_SUITE.load(Ordering::Relaxed) {
        0 => String::new(),
        v => {
            let s = rustls::CipherSuite::from(v);
            // rustls names them TLS13_AES_128_GCM_SHA256; IANA (and Go's
            // tls.CipherSuiteName) TLS_AES_128_GCM_SHA256.
            format!("{s:?}").replacen("TLS13_", "TLS_", 1)
        }
    }
}

/// What qlog's recovery:metrics_updated events tell beyond
/// `Connection::stats()`: RTT variance, latest RTT, bytes in flight and the
/// number of probe timeouts (each rise of pto_count is one PTO).
#[derive(Debug, Default, Clone, Copy)]
pub struct QlogMetrics {
    pub seen: bool,
    pub rtt_variance_ms: f64,
    pub latest_rtt_ms: f64,
    pub bytes_in_flight: i64,
    pub ptos: i64,
    last_pto_count: i64,
}

#[derive(Default)]
struct TapInner {
    file: Option<BufWriter<File>>,
    line: Vec<u8>,
    metrics: QlogMetrics,
    group_id: Option<String>,
    error: Option<String>,
}

impl TapInner {
    fn record(&mut self, rec: &[u8]) {
        let rec = rec.strip_prefix(b"\x1e").unwrap_or(rec);
        let is_metrics = contains(rec, b"metrics_updated");
        if !is_metrics && self.group_id.is_some() {
            return;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(rec) else { return };
        if self.group_id.is_none() {
            if let Some(g) = v.get("group_id").and_then(|g| g.as_str()) {
                self.group_id = Some(g.to_string());
            }
        }
        if !is_metrics {
            return;
        }
        let Some(d) = v.get("data") else { return };
        let m = &mut self.metrics;
        m.seen = true;
        let f = |k: &str| d.get(k).and_then(|x| x.as_f64());
        // quinn writes the RTTs in seconds (as_secs_f32), where qlog
        // specifies milliseconds.
        if let Some(x) = f("rtt_variance") {
            m.rtt_variance_ms = x * 1000.0;
        }
        if let Some(x) = f("latest_rtt") {
            m.latest_rtt_ms = x * 1000.0;
        }
        if let Some(x) = f("bytes_in_flight") {
            m.bytes_in_flight = x as i64;
        }
        if let Some(x) = f("pto_count") {
            let x = x as i64;
            if x > m.last_pto_count {
                m.ptos += x - m.last_pto_count;
            }
            m.last_pto_count = x;
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A connection's qlog: quinn's JSON-SEQ stream, written to a file and
/// read on the way for the metrics quinn's statistics lack.
#[derive(Clone, Default)]
pub struct QlogTap {
    inner: Arc<Mutex<TapInner>>,
    path: Arc<Mutex<Option<PathBuf>>>,
}

struct TapWriter(Arc<Mutex<TapInner>>);

impl Write for TapWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = t.file.as_mut() {
            if let Err(e) = f.write_all(buf) {
                t.error.get_or_insert_with(|| e.to_string());
                t.file = None;
            }
        }
        t.line.extend_from_slice(buf);
        while let Some(pos) = t.line.iter().position(|&b| b == b'\n') {
            let rec: Vec<u8> = t.line.drain(..=pos).collect();
            t.record(&rec[..rec.len() - 1]);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match t.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl QlogTap {
    /// A qlog written to `path` (created), with `title` in its header;
    /// returns the tap and the stream for [`Transport::config`].
    pub fn create(path: &Path, title: &str, start: Instant) -> Result<(QlogTap, QlogStream), String> {
        let file = File::create(path).map_err(|e| format!("qlog {}: {e}", path.display()))?;
        let tap = QlogTap {
            inner: Arc::new(Mutex::new(TapInner {
                file: Some(BufWriter::with_capacity(256 << 10, file)),
                ..Default::default()
            })),
            path: Arc::new(Mutex::new(Some(path.to_path_buf()))),
        };
        let mut c = QlogConfig::default();
        c.writer(Box::new(TapWriter(tap.inner.clone())))
            .title(Some(title.to_string()))
            .description(Some(version()))
            .start_time(start);
        let stream = c.into_stream().ok_or_else(|| format!("qlog {}: quinn could not start it", path.display()))?;
        Ok((tap, stream))
    }

    /// The metrics read so far.
    pub fn metrics(&self) -> QlogMetrics {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).metrics
    }

    /// The group_id of the events (quinn writes the original destination
    /// connection ID the client chose, in hex).
    pub fn group_id(&self) -> Option<String> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).group_id.clone()
    }

    /// Flushes the file; returns the first write error, if any.
    pub fn flush(&self) -> Result<(), String> {
        let mut t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = t.file.as_mut() {
            if let Err(e) = f.flush() {
                t.error.get_or_insert_with(|| e.to_string());
            }
        }
        match &t.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Renames the file to `to` (the file stays open: later events land
    /// in it).
    pub fn rename(&self, to: &Path) -> Result<(), String> {
        let mut p = self.path.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(from) = p.as_ref() {
            std::fs::rename(from, to).map_err(|e| format!("qlog {} -> {}: {e}", from.display(), to.display()))?;
            *p = Some(to.to_path_buf());
        }
        Ok(())
    }

    /// The file's current path.
    pub fn path(&self) -> Option<PathBuf> {
        self.path.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A connection's statistics as quinn reports them.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub cc: &'static str,
    pub srtt_ms: f64,
    pub min_rtt_ms: f64,
    pub cwnd: u64,
    pub ssthresh: Option<u64>,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    pub current_mtu: u16,
    /// From the qlog, when one is written.
    pub qlog: Option<QlogMetrics>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Reads `Connection::stats()` and the congestion controller's state (and
/// the qlog's metrics, when there is a tap).
pub fn snapshot(conn: &quinn::Connection, tap: Option<&QlogTap>) -> Snapshot {
    let st = conn.stats();
    let ctl = conn.congestion_state();
    let m = ctl.metrics();
    let cc = identify_cc(ctl);
    Snapshot {
        cc,
        srtt_ms: ms(st.path.rtt),
        min_rtt_ms: ms(st.path.min_rtt),
        cwnd: st.path.cwnd,
        ssthresh: m.ssthresh.filter(|&s| s != u64::MAX),
        sent_packets: st.path.sent_packets,
        lost_packets: st.path.lost_packets,
        lost_bytes: st.path.lost_bytes,
        congestion_events: st.path.congestion_events,
        current_mtu: st.path.current_mtu,
        qlog: tap.map(|t| t.metrics()).filter(|m| m.seen),
    }
}

fn i(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl Snapshot {
    /// The server's `end` statistics (server.py's keys; -1 = not exposed).
    pub fn server_stats(&self) -> ServerStats {
        let q = self.qlog;
        ServerStats {
            cc: self.cc.to_string(),
            srtt_ms: self.srtt_ms,
            rttvar_ms: q.map_or(-1.0, |q| q.rtt_variance_ms),
            min_rtt_ms: self.min_rtt_ms,
            cwnd: i(self.cwnd),
            ssthresh: self.ssthresh.map_or(-1, i),
            bytes_in_flight: q.map_or(-1, |q| q.bytes_in_flight),
            packets_sent: i(self.sent_packets),
            packets_lost: i(self.lost_packets),
            bytes_lost: i(self.lost_bytes),
            pto_count: q.map_or(-1, |q| q.ptos),
            congestion_events: Some(i(self.congestion_events)),
        }
    }

    /// The client's transport statistics (`model.TransportStats`).
    pub fn transport(&self, side: &str) -> TransportStats {
        let q = self.qlog;
        TransportStats {
            kind: "quic".into(),
            side: side.into(),
            congestion_algo: self.cc.into(),
            smoothed_rtt_ms: self.srtt_ms,
            // NotMeasured is a count's marker; for the RTT variance 0 with
            // no qlog is what client.py would not know either.
            rtt_var_ms: q.map_or(0.0, |q| q.rtt_variance_ms),
            min_rtt_ms: self.min_rtt_ms,
            cwnd_bytes: i(self.cwnd),
            ssthresh_bytes: self.ssthresh.map_or(0, i),
            packets_sent: i(self.sent_packets),
            packets_lost: i(self.lost_packets),
            retransmits: i(self.lost_packets),
            bytes_retransmitted: i(self.lost_bytes),
            delivery_rate_bps: 0,
            congestion_events: i(self.congestion_events),
            pto_count: q.map_or(NOT_MEASURED, |q| q.ptos),
            congestion_state_changes: NOT_MEASURED,
            latest_rtt_ms: q.map(|q| q.latest_rtt_ms),
            bytes_in_flight: q.map(|q| q.bytes_in_flight),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cc_names() {
        assert_eq!(Cc::from_name("cc", "").unwrap(), Cc::Cubic);
        assert_eq!(Cc::from_name("cc", "reno").unwrap(), Cc::Reno);
        assert_eq!(Cc::from_name("cc", "bbr").unwrap(), Cc::Bbr);
        assert_eq!(Cc::from_name("cc", "bbr2").unwrap_err(), "cc \"bbr2\": this stack runs reno, cubic, bbr only");
        for cc in [Cc::Reno, Cc::Cubic, Cc::Bbr] {
            let ctl = cc.factory().build(Instant::now(), 1452);
            assert_eq!(identify_cc(ctl), cc.name());
        }
    }

    #[test]
    fn tap_reads_metrics_and_group_id() {
        let dir = std::env::temp_dir().join(format!("qb-quinn-tap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.sqlog");
        let (tap, _stream) = QlogTap::create(&p, "t", Instant::now()).unwrap();
        let mut w = TapWriter(tap.inner.clone());
        let recs = [
            r#"{"time":1.0,"name":"transport:packet_sent","data":{},"group_id":"abcd"}"#,
            r#"{"time":2.0,"name":"recovery:metrics_updated","data":{"rtt_variance":0.0035,"pto_count":1,"bytes_in_flight":1200}}"#,
            r#"{"time":3.0,"name":"recovery:metrics_updated","data":{"pto_count":2}}"#,
            r#"{"time":4.0,"name":"recovery:metrics_updated","data":{"pto_count":0,"latest_rtt":0.0205}}"#,
            r#"{"time":5.0,"name":"recovery:metrics_updated","data":{"pto_count":1}}"#,
        ];
        for r in recs {
            // quinn's streamer writes a record in pieces.
            w.write_all(b"\x1e").unwrap();
            let (a, b) = r.split_at(r.len() / 2);
            w.write_all(a.as_bytes()).unwrap();
            w.write_all(b.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        let m = tap.metrics();
        assert!(m.seen);
        assert!((m.rtt_variance_ms - 3.5).abs() < 1e-9 && (m.latest_rtt_ms - 20.5).abs() < 1e-9);
        assert_eq!((m.bytes_in_flight, m.ptos), (1200, 3));
        assert_eq!(tap.group_id().as_deref(), Some("abcd"));
        tap.flush().unwrap();
        let to = dir.join("y.sqlog");
        tap.rename(&to).unwrap();
        let text = std::fs::read_to_string(&to).unwrap();
        assert!(text.contains("metrics_updated") && text.starts_with('\u{1e}'));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn suite_names() {
        LAST_SUITE.store(u16::from(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256), Ordering::Relaxed);
        assert_eq!(negotiated_suite(), "TLS_AES_128_GCM_SHA256");
        LAST_SUITE.store(u16::from(rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256), Ordering::Relaxed);
        assert_eq!(negotiated_suite(), "TLS_CHACHA20_POLY1305_SHA256");
        assert_eq!(witnessed_provider().cipher_suites.len(), 3);
    }
}

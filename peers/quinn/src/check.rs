//! The self-check both programs run with `--check`: a server and a client
//! in this process over loopback (a throwaway certificate, qlog on, each
//! congestion control in turn), fetching a pattern body and a PNG page
//! object, then reading both ends' statistics through the accessors the
//! programs rely on. It fails when quinn's statistics, qlog or the
//! negotiated suite read nothing.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbpeer::events::ServerStats;
use qbpeer::record::{Clock, Record};
use qbpeer::{ClientRequest, ServerConfig};
use tokio::sync::Notify;

use crate::server::{Report, Server};
use crate::{version, versions_json, CC_NAMES};

/// Runs the check and prints its JSON report; exit status 1 on failure.
pub fn main() -> ExitCode {
    match run() {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{} self-check failed: {e}", version());
            ExitCode::FAILURE
        }
    }
}

/// The check; returns its report.
pub fn run() -> Result<serde_json::Value, String> {
    let dir = std::env::temp_dir().join(format!("qb-quinn-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = check_in(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn check_in(dir: &std::path::Path) -> Result<serde_json::Value, String> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).map_err(|e| e.to_string())?;
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let mut report = versions_json();
    for cc in CC_NAMES {
        let qlog_dir = dir.join(format!("qlog-{cc}"));
        let cfg = ServerConfig {
            host: "127.0.0.1".into(),
            port: 0,
            cert: cert_file.clone(),
            key: key_file.clone(),
            cc: cc.into(),
            max_datagram_size: 0,
            max_data: 0,
            max_stream_data: 0,
            socket_buffer: 0,
            qlog_dir: qlog_dir.display().to_string(),
            keylog: dir.join("keys.log").display().to_string(),
            sites: Some(BTreeMap::new()),
            png_head: String::new(),
            png_tail: String::new(),
        };
        let req = ClientRequest::parse(
            &serde_json::json!({
                "host": "127.0.0.1", "port": 1, "server_name": "localhost", "ca_pem": cert.cert.pem(),
                "paths": ["/bytes/2MB", "/page/3/2KB/1.png"], "warm": true, "congestion_control": cc,
                "qlog_dir": qlog_dir.display().to_string(), "timeout": 30,
            })
            .to_string(),
        )?;
        let (rec, ends) = rt.block_on(pair(&cfg, req))?;
        let v = verify(cc, &rec, &ends)?;
        report[cc] = v;
    }
    let keys = std::fs::read_to_string(dir.join("keys.log")).unwrap_or_default();
    if !keys.contains("CLIENT_TRAFFIC_SECRET_0 ") {
        return Err("the server's key log holds no CLIENT_TRAFFIC_SECRET_0".into());
    }
    Ok(report)
}

type Ends = Arc<Mutex<Vec<(String, ServerStats)>>>;

/// Keeps the server's reports.
struct Keep(Ends);

impl Report for Keep {
    fn open(&self, _addr: &str) {}
    fn end(&self, addr: &str, stats: &ServerStats) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((addr.into(), stats.clone()));
    }
    fn live(&self, _addr: &str, _stats: Option<&ServerStats>) {} // the check asks nothing
}

/// A server on loopback and one client sample against it.
async fn pair(cfg: &ServerConfig, mut req: ClientRequest) -> Result<(Record, Ends), String> {
    let server = Server::bind(cfg)?;
    req.port = server.local_addr().port();
    let ends: Ends = Arc::default();
    let stop = Arc::new(Notify::new());
    let served = tokio::spawn(server.run(stop.clone(), None, Arc::new(Keep(ends.clone()))));
    let mut rec = Record { version: version(), ..Default::default() };
    let res = tokio::time::timeout(Duration::from_secs(30), crate::client::run(&req, &mut rec, Clock::start())).await;
    // The server reports a connection once the client's close arrived.
    for _ in 0..100 {
        if !ends.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.notify_one();
    let _ = served.await;
    match res {
        Err(_) => return Err("the client's sample took over 30 s".into()),
        Ok(Err(e)) => return Err(format!("client: {e}")),
        Ok(Ok(())) => {}
    }
    Ok((rec, ends))
}

fn verify(cc: &str, rec: &Record, ends: &Ends) -> Result<serde_json::Value, String> {
    let fail = |what: &str| Err(format!("{cc}: {what}"));
    if rec.requests.len() != 2 || rec.requests.iter().any(|r| r.error.is_some() || r.end == 0) {
        return fail(&format!("requests incomplete: {:?}", rec.requests));
    }
    if rec.requests[0].bytes != 2_000_000 || rec.requests[1].bytes != 2000 {
        return fail("wrong body sizes");
    }
    let c = &rec.conns[0];
    let n = c.negotiated.as_ref().ok_or("no negotiated parameters")?;
    if n.alpn != "h3" || !n.cipher.starts_with("TLS_") {
        return fail(&format!("negotiated ALPN {:?}, cipher {:?}", n.alpn, n.cipher));
    }
    let t = c.transport.as_ref().ok_or("no transport statistics")?;
    if t.congestion_algo != cc || t.cwnd_bytes <= 0 || t.packets_sent <= 0 || t.smoothed_rtt_ms <= 0.0 {
        return fail(&format!("client statistics read nothing: {t:?}"));
    }
    if t.pto_count < 0 || t.latest_rtt_ms.is_none() {
        return fail(&format!("the client's qlog metrics were not read: {t:?}"));
    }
    let qlogs = rec.qlogs.clone().unwrap_or_default();
    if !qlogs.iter().any(|q| q.ends_with("_client.sqlog")) {
        return fail(&format!("no client qlog named by its connection ID: {qlogs:?}"));
    }
    let ends = ends.lock().unwrap_or_else(|e| e.into_inner());
    let Some((addr, s)) = ends.first() else { return fail("the server reported no connection end") };
    if s.cc != cc || s.cwnd <= 0 || s.packets_sent <= 0 || s.srtt_ms <= 0.0 || s.rttvar_ms < 0.0 || s.pto_count < 0 {
        return fail(&format!("server statistics read nothing: {s:?}"));
    }
    if !qlogs.iter().any(|q| q.ends_with("_server.sqlog")) {
        return fail(&format!("no server qlog: {qlogs:?}"));
    }
    Ok(serde_json::json!({"client": t, "server": s, "server_saw": addr, "cipher": n.cipher}))
}

//! The quinn server and client in one process over loopback.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qb_quinn::server::{Report, Server};
use qbpeer::events::ServerStats;
use qbpeer::record::{Clock, Record};
use qbpeer::{ClientRequest, ServerConfig};
use tokio::sync::Notify;

#[derive(Default)]
struct Keep {
    opened: Mutex<Vec<String>>,
    ended: Mutex<Vec<(String, ServerStats)>>,
    live: Mutex<Vec<(String, Option<ServerStats>)>>,
}

impl Report for Keep {
    fn open(&self, addr: &str) {
        self.opened.lock().unwrap().push(addr.into());
    }
    fn end(&self, addr: &str, stats: &ServerStats) {
        self.ended.lock().unwrap().push((addr.into(), stats.clone()));
    }
    fn live(&self, addr: &str, stats: Option<&ServerStats>) {
        self.live.lock().unwrap().push((addr.into(), stats.cloned()));
    }
}

/// The programs' own self-check (both ends, every congestion control,
/// statistics, qlog, key log) passes.
#[test]
fn self_check_passes() {
    let report = qb_quinn::check::run().expect("self-check");
    assert_eq!(report["version"], qb_quinn::version());
    for cc in qb_quinn::CC_NAMES {
        assert_eq!(report[cc]["client"]["CongestionAlgo"], cc);
        assert_eq!(report[cc]["server"]["cc"], cc);
    }
}

/// At the sample's timeout the client stops its requests, keeps their
/// records (without an error of their own, as client.py), says why, and
/// closes the connection so that the server reports its end. While the
/// connection is open, a stats request for its address is answered with
/// its statistics, and one for another address with none.
#[test]
fn total_timeout_keeps_partial_records_and_closes() {
    let dir = std::env::temp_dir().join(format!("qb-quinn-loopback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let cfg = ServerConfig {
        host: "127.0.0.1".into(),
        port: 0,
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        cc: "reno".into(),
        max_datagram_size: 0,
        max_data: 0,
        max_stream_data: 0,
        socket_buffer: 0,
        qlog_dir: String::new(),
        keylog: String::new(),
        sites: Some(BTreeMap::new()),
        png_head: String::new(),
        png_tail: String::new(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let keep = Arc::new(Keep::default());
    let (rec, err) = rt.block_on(async {
        let server = Server::bind(&cfg).unwrap();
        let port = server.local_addr().port();
        let stop = Arc::new(Notify::new());
        let (ask, asks) = tokio::sync::mpsc::unbounded_channel();
        let served = tokio::spawn(server.run(stop.clone(), Some(asks), keep.clone()));
        let watcher = keep.clone();
        let asker = tokio::spawn(async move {
            for _ in 0..150 {
                let first = watcher.opened.lock().unwrap().first().cloned();
                if let Some(addr) = first {
                    tokio::time::sleep(Duration::from_millis(300)).await; // handshake done, data flowing
                    ask.send(addr).unwrap();
                    ask.send("127.0.0.1:1".into()).unwrap();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        // 100 segments one second apart: far longer than the 2 s timeout.
        let req = ClientRequest::parse(
            &serde_json::json!({
                "host": "127.0.0.1", "port": port, "server_name": "localhost", "ca_pem": cert.cert.pem(),
                "paths": ["/stream?segments=100&interval=1s&size=1000", "/echo"], "timeout": 2,
            })
            .to_string(),
        )
        .unwrap();
        let mut rec = Record::default();
        let err = qb_quinn::client::run(&req, &mut rec, Clock::start()).await.unwrap_err();
        asker.await.unwrap();
        for _ in 0..500 {
            if !keep.ended.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.notify_one();
        served.await.unwrap();
        (rec, err)
    });
    assert_eq!(err, "timeout (total, 2s)");
    // The stream was under way; /echo never started.
    assert_eq!(rec.requests.len(), 1, "{:?}", rec.requests);
    let r = &rec.requests[0];
    assert!(r.start > 0 && r.first_byte > 0 && r.bytes >= 1000 && r.end == 0 && r.error.is_none(), "{r:?}");
    assert!(rec.measure_end >= rec.measure_start && rec.conns[0].closed > 0);
    let ended = keep.ended.lock().unwrap();
    assert_eq!(ended.len(), 1, "the server saw no close");
    assert_eq!(keep.opened.lock().unwrap()[0], ended[0].0);
    assert_eq!(ended[0].1.cc, "reno");
    let live = keep.live.lock().unwrap();
    assert_eq!(live.len(), 2, "{live:?}");
    assert_eq!(live[0].0, ended[0].0);
    let open = live[0].1.as_ref().expect("the open connection's statistics");
    assert!(open.cc == "reno" && open.srtt_ms > 0.0 && open.packets_sent > 0, "{open:?}");
    assert!(open.packets_sent <= ended[0].1.packets_sent);
    assert!(live[1].0 == "127.0.0.1:1" && live[1].1.is_none(), "{:?}", live[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

//! Byte-identity with quicbench's own server, and interoperation both ways.
//!
//! Runs `quicbench serve` (quic-go) and `qb-quinn-server` side by side on
//! loopback, fetches the same resources from both over HTTP/3 and compares
//! status, Content-Type and the SHA-256 of every body; then runs
//! `quicbench fetch --proto h3 --verify` against the quinn server and
//! `qb-quinn-client` against `quicbench serve`.
//!
//! It needs quicbench's binary: $QUICBENCH_BIN, else bin/quicbench at the
//! repository root (`go build -o bin/quicbench ./cmd/quicbench`, which
//! scripts/setup.sh does). Without it the test is skipped with a note, or
//! fails when QUICBENCH_REQUIRE_ALL=1 (CI), as quicbench's Go tests do.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use qb_quinn::fetch::{fetch, Fetched};
use sha2::{Digest, Sha256};

fn quicbench_bin() -> Option<PathBuf> {
    let p = match std::env::var_os("QUICBENCH_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bin/quicbench"),
    };
    if p.is_file() {
        return Some(p);
    }
    let msg = format!("quicbench binary not found at {} (set QUICBENCH_BIN or build bin/quicbench)", p.display());
    if std::env::var("QUICBENCH_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("{msg}");
    }
    eprintln!("SKIP: {msg}");
    None
}

/// A child process killed when dropped; its stdin open until then.
struct Proc {
    child: Child,
    _stdin: Option<ChildStdin>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        drop(self._stdin.take()); // the end of stdin stops both servers
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` and returns it with the first stdout line that parses as
/// JSON and holds `key`.
fn start(mut cmd: Command, key: &str) -> (Proc, serde_json::Value) {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut proc = Proc { child, _stdin: None };
    proc._stdin = proc.child.stdin.take();
    let mut out = BufReader::new(proc.child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "{cmd:?} ended before printing {key}");
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
            if v.get(key).is_some() {
                // Keep draining its output so that it never blocks.
                std::thread::spawn(move || {
                    let mut sink = String::new();
                    while out.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                        sink.clear();
                    }
                });
                return (proc, v);
            }
        }
    }
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

fn site(dir: &Path) {
    std::fs::create_dir_all(dir.join("a/sub")).unwrap();
    std::fs::write(dir.join("index.html"), "<!doctype html><title>t</title><p>hello</p>\n").unwrap();
    std::fs::write(dir.join("a/b.css"), "body { color: red }\n").unwrap();
    std::fs::write(dir.join("a/sub/index.html"), "<p>sub</p>").unwrap();
    std::fs::write(dir.join("a/data.json"), "{\"x\":1}").unwrap();
    let blob: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(dir.join("a/blob.bin"), blob).unwrap();
    std::fs::write(dir.join("empty.txt"), "").unwrap();
}

#[test]
fn bodies_match_quicbench_and_both_interoperate() {
    let Some(qb) = quicbench_bin() else { return };
    let dir = std::env::temp_dir().join(format!("qb-quinn-identity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let www = dir.join("www");
    site(&www);
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let ca = cert.cert.pem();

    let mut go = Command::new(&qb);
    go.args(["serve", "--control", "--host", "127.0.0.1", "--port", "0", "--plain-port", "0", "--protocols", "h3"])
        .arg("--cert")
        .arg(&cert_file)
        .arg("--key")
        .arg(&key_file)
        .arg("--site")
        .arg(format!("www={}", www.display()));
    let (_go, hello) = start(go, "body");
    let go_port =
        hello["body"]["port"].as_u64().unwrap_or_else(|| panic!("no port in quicbench's hello: {hello}")) as u16;

    let cfg = serde_json::json!({
        "host": "127.0.0.1", "port": 0, "cert": cert_file, "key": key_file, "cc": "cubic",
        "max_datagram_size": 1452, "max_data": 15 << 20, "max_stream_data": 6 << 20, "socket_buffer": 0,
        "qlog_dir": "", "keylog": "", "sites": {"www": www}, "png_head": "", "png_tail": "",
    });
    let cfg_file = dir.join("quinn.json");
    std::fs::write(&cfg_file, cfg.to_string()).unwrap();
    let mut qn = Command::new(env!("CARGO_BIN_EXE_qb-quinn-server"));
    qn.arg("--config").arg(&cfg_file);
    let (_qn, ready) = start(qn, "ready");
    let qn_port = ready["ready"]["port"].as_u64().unwrap() as u16;
    assert_eq!(ready["ready"]["cc"], "cubic");
    assert_eq!(ready["ready"]["max_datagram_size"], 1452);

    // Resources: (method, path, request body, compare the body?)
    let mut reqs: Vec<(&str, String, Vec<u8>, bool)> = Vec::new();
    for n in ["0", "1", "65535", "65536", "65537", "1000000", "3MB", "1.5MiB", "100k"] {
        reqs.push(("GET", format!("/bytes/{n}"), vec![], true));
    }
    for p in ["/page/5/8KB", "/page/20/10-300", "/page/20/10-20KB", "/page/0/1KB", "/page/3/83"] {
        reqs.push(("GET", p.to_string(), vec![], true));
    }
    // Objects of a range spanning the PNG minimum (83 bytes): raw pattern
    // below it, PNGs above.
    let range = qbpeer::content::Page::parse("20", "10-300").unwrap();
    let sizes: Vec<u64> = (0..20).map(|i| range.object_size(i)).collect();
    assert!(sizes.iter().any(|&s| s < 83) && sizes.iter().any(|&s| s >= 83), "{sizes:?}");
    for i in 0..20 {
        reqs.push(("GET", format!("/page/20/10-300/{i}.png"), vec![], true));
        reqs.push(("GET", format!("/page/20/10-20KB/{i}.png"), vec![], true));
    }
    for p in ["/page/3/83/0.png", "/page/3/82/2.png", "/page/1/300KB/0.png"] {
        reqs.push(("GET", p.to_string(), vec![], true));
    }
    for p in [
        "/stream?segments=5&interval=10ms&size=1000",
        "/stream?segments=3&interval=0&size=70000",
        "/stream",
        "/site/www/",
        "/site/www/index.html",
        "/site/www/a/b.css",
        "/site/www/a/data.json",
        "/site/www/a/blob.bin",
        "/site/www/a/sub/",
        "/site/www/a/sub/index.html",
        "/site/www/a/b.css/",
        "/site/www/empty.txt",
        "/echo",
        // errors: the same status and text
        "/bytes/2TiB",
        "/bytes/x",
        "/bytes/1.5",
        "/page/x/1KB",
        "/page/3/1KB/3.png",
        "/page/3/9KB-1KB",
        "/stream?segments=0",
        "/stream?interval=2m",
        "/stream?size=65MiB",
        "/nothing",
        "/site/www/missing",
        "/site/nosuchsite/x",
        "/upload",
    ] {
        reqs.push(("GET", p.to_string(), vec![], true));
    }
    reqs.push(("POST", "/echo".into(), b"hello quinn".to_vec(), true));
    // Redirects: the status only (Go's body is an HTML link).
    reqs.push(("GET", "/site/www/a/sub".into(), vec![], false));
    // /upload's answer holds a time: its byte count only.
    reqs.push(("POST", "/upload".into(), vec![7u8; 100_000], false));

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let list: Vec<(&str, &str, Vec<u8>)> = reqs.iter().map(|(m, p, b, _)| (*m, p.as_str(), b.clone())).collect();
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let from_go = rt.block_on(fetch(at(go_port), "localhost", &ca, &list)).expect("fetch from quicbench serve");
    let from_qn = rt.block_on(fetch(at(qn_port), "localhost", &ca, &list)).expect("fetch from qb-quinn-server");

    let mut bad = Vec::new();
    let mut table = BTreeMap::new();
    for (((m, p, _, body), g), q) in reqs.iter().zip(&from_go).zip(&from_qn) {
        let ct = |f: &Fetched| f.headers.get("content-type").map(|v| v.to_str().unwrap_or("").to_string());
        let same = g.status == q.status && (!body || (sha(&g.body) == sha(&q.body) && ct(g) == ct(q)));
        if !same {
            bad.push(format!(
                "{m} {p}: quicbench {} {:?} {} bytes sha256 {} / quinn {} {:?} {} bytes sha256 {}\n  go: {:?}\n  qn: {:?}",
                g.status,
                ct(g),
                g.body.len(),
                sha(&g.body),
                q.status,
                ct(q),
                q.body.len(),
                sha(&q.body),
                String::from_utf8_lossy(&g.body[..g.body.len().min(200)]),
                String::from_utf8_lossy(&q.body[..q.body.len().min(200)]),
            ));
        }
        assert_eq!(q.headers.get("cache-control").map(|v| v.as_bytes()), Some(&b"no-store"[..]), "{p}");
        table.insert(format!("{m} {p}"), (q.status, q.body.len(), sha(&q.body)));
    }
    assert!(bad.is_empty(), "{} of {} responses differ:\n{}", bad.len(), reqs.len(), bad.join("\n"));
    let up = String::from_utf8_lossy(&from_qn.last().unwrap().body).into_owned();
    assert!(up.starts_with("{\"bytes\":100000,\"nanos\":"), "{up}");
    for (k, (s, n, h)) in &table {
        println!("{s} {n:>9} {h} {k}");
    }

    // quicbench's own client against the quinn server, verifying bodies.
    let out = Command::new(&qb)
        .args(["fetch", "--proto", "h3", "--verify", "--ca"])
        .arg(&cert_file)
        .args(["--server-name", "localhost", "--addr"])
        .arg(format!("127.0.0.1:{qn_port}"))
        .args(["/bytes/5MB", "/page/3/100-20KB/0.png", "/echo"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "quicbench fetch --proto h3 against qb-quinn-server: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The quinn client against quicbench's server.
    let req = serde_json::json!({
        "host": "127.0.0.1", "port": go_port, "server_name": "localhost", "ca_pem": ca,
        "paths": ["/bytes/2MB", "/upload"], "repeat": 2, "parallel": 2, "upload": 50000, "warm": true,
    });
    let mut client = Command::new(env!("CARGO_BIN_EXE_qb-quinn-client"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    client.stdin.take().unwrap().write_all(req.to_string().as_bytes()).unwrap();
    let out = client.wait_with_output().unwrap();
    assert!(out.status.success(), "qb-quinn-client: {}", String::from_utf8_lossy(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rec.get("error").is_none(), "qb-quinn-client against quicbench serve: {}", rec["error"]);
    assert_eq!(rec["requests"].as_array().unwrap().len(), 4);
    for r in rec["requests"].as_array().unwrap() {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["upload_bytes"], 50000);
        if r["path"] == "/upload" {
            assert!(r["server_upload_ns"].as_i64().is_some(), "{r}");
        } else {
            assert_eq!(r["bytes"], 2_000_000);
        }
    }
    assert_eq!(rec["conns"][0]["negotiated"]["ALPN"], "h3");
    let _ = std::fs::remove_dir_all(&dir);
}

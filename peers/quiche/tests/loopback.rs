//! The quiche peer against quicbench's own server, on loopback.
//!
//! * byte identity: the quiche client fetches every kind of resource from
//!   `quicbench serve` and from `qb-quiche-server` and the bodies' SHA-256
//!   must agree (pages and their objects of fixed and ranged sizes,
//!   `/bytes`, `/stream`, `/site`, `/echo`, `/`), and uploads must be
//!   counted whole by both;
//! * interoperability: `quicbench fetch --proto h3` (quic-go) against the
//!   quiche server, and the quiche client against `quicbench serve`
//!   (quic-go), both complete.
//!
//! It needs the quicbench binary: `$QUICBENCH_BIN`, else `bin/quicbench` at
//! the repository's root (`bash scripts/setup.sh` or
//! `go build -o bin/quicbench ./cmd/quicbench`). Without it the test fails
//! under `QUICBENCH_REQUIRE_ALL=1` (CI) and says it skipped otherwise.
//!
//! Run: `cargo test --release -p qb-quiche --test loopback` in peers/.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_qb-quiche-server");
const CLIENT: &str = env!("CARGO_BIN_EXE_qb-quiche-client");

fn quicbench() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUICBENCH_BIN") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bin/quicbench");
    if p.exists() {
        return Some(p);
    }
    if std::env::var("QUICBENCH_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("QUICBENCH_REQUIRE_ALL=1: no quicbench binary (bin/quicbench or $QUICBENCH_BIN)");
    }
    eprintln!("skipping: no quicbench binary (bin/quicbench or $QUICBENCH_BIN)");
    None
}

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qb-quiche-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A self-signed certificate for localhost and 127.0.0.1 (P-256), its key.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    use boring::asn1::Asn1Time;
    use boring::bn::BigNum;
    use boring::ec::{EcGroup, EcKey};
    use boring::hash::MessageDigest;
    use boring::nid::Nid;
    use boring::pkey::PKey;
    use boring::x509::extension::{BasicConstraints, SubjectAlternativeName};
    use boring::x509::{X509Builder, X509NameBuilder};

    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_nid(Nid::COMMONNAME, "localhost")
        .unwrap();
    let name = name.build();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
        .unwrap();
    b.append_extension(&BasicConstraints::new().critical().ca().build().unwrap())
        .unwrap();
    let san = SubjectAlternativeName::new()
        .dns("localhost")
        .ip("127.0.0.1")
        .build(&b.x509v3_context(None, None))
        .unwrap();
    b.append_extension(&san).unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    let cert = b.build();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.to_pem().unwrap()).unwrap();
    std::fs::write(&k, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    (c, k)
}

/// A site of a few files, as `/site/s/`.
fn site(dir: &Path) -> PathBuf {
    let s = dir.join("site");
    std::fs::create_dir_all(s.join("sub")).unwrap();
    std::fs::write(
        s.join("index.html"),
        "<!DOCTYPE html><title>t</title><link rel=stylesheet href=a.css>\n",
    )
    .unwrap();
    std::fs::write(s.join("a.css"), "body { color: #123 }\n").unwrap();
    let bin: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(s.join("sub/blob.bin"), bin).unwrap();
    s
}

/// Starts `quicbench serve` on 127.0.0.1 (h3 only) and returns it, its UDP
/// port and the CA file.
fn start_quicbench(qb: &Path, dir: &Path, site: &Path) -> (Proc, u16, PathBuf) {
    let ca = dir.join("qb-ca.pem");
    let mut child = Command::new(qb)
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--plain-port",
            "0",
            "--protocols",
            "h3",
        ])
        .arg("--ca-out")
        .arg(&ca)
        .arg("--site")
        .arg(format!("s={}", site.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting quicbench serve");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut port = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.trim().strip_prefix("QUIC/UDP") {
            let addr = rest.split_whitespace().next().unwrap();
            port = addr.rsplit(':').next().unwrap().parse().unwrap();
            break;
        }
    }
    assert!(port != 0, "quicbench serve printed no QUIC/UDP address");
    // Keep reading: a Go program writing to a closed stdout dies of SIGPIPE.
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), port, ca)
}

/// Starts the quiche server with `cc`; returns it, its port and its ready
/// line.
fn start_quiche(
    dir: &Path,
    cert: &Path,
    key: &Path,
    site: &Path,
    cc: &str,
) -> (Proc, u16, serde_json::Value) {
    let conf = dir.join(format!("config-{cc}.json"));
    let mut sites = BTreeMap::new();
    sites.insert("s", site);
    let c = serde_json::json!({
        "host": "127.0.0.1", "port": 0, "cert": cert, "key": key, "cc": cc,
        "max_datagram_size": 1452, "max_data": 15 << 20, "max_stream_data": 6 << 20,
        "socket_buffer": 4 << 20, "qlog_dir": "", "keylog": dir.join("keys.txt"), "sites": sites,
        "png_head": "", "png_tail": "",
    });
    std::fs::write(&conf, c.to_string()).unwrap();
    let mut child = Command::new(SERVER)
        .arg("--config")
        .arg(&conf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting qb-quiche-server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("ready line {line:?}: {e}"));
    let port = v["ready"]["port"].as_u64().expect("ready.port") as u16;
    // Keep reading its lines so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    (Proc(child), port, v)
}

/// Runs the quiche client; returns its record and the bodies it saved.
fn fetch(
    port: u16,
    ca: &Path,
    paths: &[&str],
    upload: u64,
    dir: &Path,
    cc: &str,
) -> (serde_json::Value, Vec<Vec<u8>>) {
    let bodies = tempdir(&format!("bodies-{port}-{}", rand_tag()));
    let req = serde_json::json!({
        "host": "127.0.0.1", "port": port, "server_name": "localhost",
        "ca_pem": std::fs::read_to_string(ca).unwrap(),
        "paths": paths, "parallel": 4, "upload": upload, "timeout": 60.0,
        "keylog": dir.join("client-keys.txt"), "congestion_control": cc,
    });
    let mut child = Command::new(CLIENT)
        .arg("--bodies")
        .arg(&bodies)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "client exit {:?}", out.status);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON record");
    let saved = (0..paths.len())
        .map(|i| std::fs::read(bodies.join(i.to_string())).unwrap_or_default())
        .collect();
    (rec, saved)
}

fn rand_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn sha256(b: &[u8]) -> String {
    boring::sha::sha256(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn bodies_identical_to_quicbench_and_interop() {
    let Some(qb) = quicbench() else { return };
    let dir = tempdir("loopback");
    let (cert, key) = certificate(&dir);
    let site = site(&dir);
    let (_qbs, qb_port, qb_ca) = start_quicbench(&qb, &dir, &site);
    let (mut qs, q_port, ready) = start_quiche(&dir, &cert, &key, &site, "cubic");
    assert!(
        ready["ready"]["version"]
            .as_str()
            .unwrap()
            .starts_with("quiche 0."),
        "{ready}"
    );
    assert_eq!(ready["ready"]["cc"], "cubic");

    // Not "/": its index text names the stack.
    let paths = [
        "/bytes/0",
        "/bytes/1",
        "/bytes/100000",
        "/bytes/3MB",
        "/page/5/2KB",
        "/page/5/2KB/0.png",
        "/page/5/2KB/4.png",
        "/page/20/10-80/3.png",
        "/page/20/10-80000/7.png",
        "/page/20/10-80000/8.png",
        "/page/3/50/1.png",
        "/stream?segments=4&interval=20ms&size=3000",
        "/echo",
        "/site/s/",
        "/site/s/a.css",
        "/site/s/sub/blob.bin",
    ];
    let (rq, bq) = fetch(qb_port, &qb_ca, &paths, 0, &dir, "cubic");
    let (rs, bs) = fetch(q_port, &cert, &paths, 0, &dir, "cubic");
    assert!(
        rq.get("error").is_none(),
        "quiche client vs quicbench serve: {rq}"
    );
    assert!(
        rs.get("error").is_none(),
        "quiche client vs quiche server: {rs}"
    );
    let differ: Vec<String> = paths
        .iter()
        .enumerate()
        .filter(|(i, _)| sha256(&bq[*i]) != sha256(&bs[*i]))
        .map(|(i, p)| format!("{p} ({} vs {} bytes)", bq[i].len(), bs[i].len()))
        .collect();
    assert!(
        differ.is_empty(),
        "bodies differ from quicbench serve's: {differ:?}"
    );
    // Sizes are those the paths ask for (so an empty body on both sides
    // would not pass unnoticed).
    assert_eq!(bs[3].len(), 3_000_000);
    assert_eq!(bs[11].len(), 12_000);
    assert_eq!(&bs[5][..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(bs[12], b"ok\n");
    assert_eq!(bs[15].len(), 300_000);
    for r in [&rq, &rs] {
        assert_eq!(r["conns"][0]["negotiated"]["ALPN"], "h3");
        assert_eq!(r["conns"][0]["transport"]["CongestionAlgo"], "cubic");
        assert!(r["conns"][0]["transport"]["PacketsSent"].as_i64().unwrap() > 0);
    }
    assert_eq!(
        rs["conns"][0]["negotiated"]["Cipher"],
        "TLS_AES_128_GCM_SHA256"
    );

    // Uploads: both servers count every byte (the client checks /upload's
    // report).
    for port in [qb_port, q_port] {
        let ca = if port == qb_port { &qb_ca } else { &cert };
        let (r, _) = fetch(port, ca, &["/upload", "/upload"], 2_000_000, &dir, "");
        assert!(r.get("error").is_none(), "upload to port {port}: {r}");
        assert_eq!(r["requests"][0]["upload_bytes"], 2_000_000);
        assert!(r["requests"][0]["server_upload_ns"].as_i64().unwrap() > 0);
    }

    // quic-go's client (quicbench fetch) against the quiche server.
    let out = Command::new(&qb)
        .args(["fetch", "--proto", "h3", "--insecure", "--verify", "--addr"])
        .arg(format!("127.0.0.1:{q_port}"))
        .args(["/bytes/2MB", "/page/4/1KB/2.png"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "quicbench fetch against the quiche server: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&qb)
        .args(["fetch", "--proto", "h3", "--insecure", "--page", "--addr"])
        .arg(format!("127.0.0.1:{q_port}"))
        .arg("/page/30/1KB-20KB")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "quicbench fetch --page: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The end of stdin stops the server.
    drop(qs.0.stdin.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if qs.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not stop at the end of its input"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both sides wrote TLS secrets in the NSS format.
    let keys = std::fs::read_to_string(dir.join("keys.txt")).unwrap();
    assert!(
        keys.lines()
            .any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")),
        "{keys}"
    );
    let ckeys = std::fs::read_to_string(dir.join("client-keys.txt")).unwrap();
    assert!(ckeys
        .lines()
        .any(|l| l.starts_with("SERVER_HANDSHAKE_TRAFFIC_SECRET ")));
}

#[test]
fn every_congestion_control_runs_and_reports() {
    let dir = tempdir("cc");
    let (cert, key) = certificate(&dir);
    let site = site(&dir);
    for (cc, name) in [
        ("reno", "reno"),
        ("cubic", "cubic"),
        ("bbr", "bbr2_gcongestion"),
    ] {
        let (_s, port, ready) = start_quiche(&dir, &cert, &key, &site, cc);
        assert_eq!(ready["ready"]["cc"], name);
        let (r, b) = fetch(port, &cert, &["/bytes/1MB"], 0, &dir, cc);
        assert!(r.get("error").is_none(), "{cc}: {r}");
        assert_eq!(b[0].len(), 1_000_000);
        assert_eq!(r["config"]["congestion_control"], name);
        assert_eq!(r["conns"][0]["transport"]["CongestionAlgo"], name);
    }
}

#[test]
fn bad_input_is_refused_clearly() {
    // An unusable request: exit 2 and a message.
    let mut c = Command::new(CLIENT)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(br#"{"host":"127.0.0.1","port":1,"paths":["/"],"congestion_control":"vegas"}"#)
        .unwrap();
    let out = c.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("vegas"));
    // A server configuration naming an unknown controller: non-zero, a
    // message naming it.
    let dir = tempdir("bad");
    let (cert, key) = certificate(&dir);
    let conf = dir.join("c.json");
    std::fs::write(
        &conf,
        serde_json::json!({"host":"127.0.0.1","cert":cert,"key":key,"cc":"vegas"}).to_string(),
    )
    .unwrap();
    let out = Command::new(SERVER)
        .arg("--config")
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("vegas"));
    // A server that cannot be reached: the record says why, exit 0.
    let req = serde_json::json!({"host":"127.0.0.1","port":9,"paths":["/"],"handshake_timeout":0.5,"ca_pem":std::fs::read_to_string(&cert).unwrap()});
    let mut c = Command::new(CLIENT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        rec["error"].as_str().unwrap().contains("handshake"),
        "{rec}"
    );
}

#[test]
fn version_and_check() {
    let out = Command::new(SERVER).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("quiche 0."));
    let out = Command::new(CLIENT).arg("--check").output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["version"].as_str().unwrap().starts_with("quiche "));
}

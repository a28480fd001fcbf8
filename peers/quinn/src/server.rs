//! The HTTP/3 server: quinn's endpoint, h3 per connection, qbpeer's
//! resources per request, and the peer program protocol's stdout events.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;
use h3::error::Code;
use qbpeer::events::{self, ServerStats};
use qbpeer::sys::{addr_string, qlog_path, set_socket_buffers};
use qbpeer::{Next, RequestHead, Resources, ServerConfig, Upload};
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;

use crate::{identify_cc, keylog, load_cert, snapshot, version, Cc, QlogTap, Transport};

/// The largest piece of body handed to h3 at once (one DATA frame).
pub const SEND_CHUNK: usize = 256 << 10;

/// Where a server reports the start and end of each connection.
pub trait Report: Send + Sync {
    /// A connection from `addr` ("ip:port") starts.
    fn open(&self, addr: &str);
    /// The connection from `addr` ended, with its statistics.
    fn end(&self, addr: &str, stats: &ServerStats);
    /// The answer to a stats request: the open connection from `addr`'s
    /// statistics, or None when no connection from it is open.
    fn live(&self, addr: &str, stats: Option<&ServerStats>);
}

/// Reports on standard output: the peer program protocol's lines.
pub struct Stdout;

impl Report for Stdout {
    fn open(&self, addr: &str) {
        events::open(addr);
    }
    fn end(&self, addr: &str, stats: &ServerStats) {
        events::end(addr, stats);
    }
    fn live(&self, addr: &str, stats: Option<&ServerStats>) {
        events::live(addr, stats);
    }
}

/// An open connection: its sequence number, itself and its qlog tap.
type OpenConn = (u64, quinn::Connection, Option<QlogTap>);

/// The open connections by client address (the newest from each), for
/// stats requests.
#[derive(Clone, Default)]
struct Open {
    seq: Arc<AtomicU64>,
    conns: Arc<Mutex<HashMap<String, OpenConn>>>,
}

impl Open {
    fn add(&self, addr: &str, conn: &quinn::Connection, tap: Option<&QlogTap>) -> u64 {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(addr.to_string(), (n, conn.clone(), tap.cloned()));
        n
    }

    fn remove(&self, addr: &str, n: u64) {
        let mut m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if m.get(addr).is_some_and(|(k, _, _)| *k == n) {
            m.remove(addr);
        }
    }

    fn stats(&self, addr: &str) -> Option<ServerStats> {
        let m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        m.get(addr).map(|(_, c, t)| snapshot(c, t.as_ref()).server_stats())
    }
}

/// A server ready to run: its endpoint is bound.
pub struct Server {
    endpoint: quinn::Endpoint,
    crypto: Arc<QuicServerConfig>,
    transport: Transport,
    resources: Arc<Resources>,
    qlog_dir: Option<PathBuf>,
    /// What the `ready` line says.
    pub ready: events::Ready,
}

impl Server {
    /// Binds the endpoint as `cfg` says (inside a tokio runtime).
    pub fn bind(cfg: &ServerConfig) -> Result<Server, String> {
        let cc = Cc::from_name("cc", &cfg.cc)?;
        let resources = Arc::new(cfg.resources("quinn")?);
        let (max_data, max_stream_data) = cfg.windows();
        let transport = Transport {
            cc,
            datagram_size: cfg.datagram_size(),
            max_data,
            max_stream_data,
            idle_timeout: Duration::from_secs(120),
            max_streams: 1000,
        };
        let (chain, key) = load_cert(&cfg.cert, &cfg.key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("cert {}: {e}", cfg.cert.display()))?;
        tls.alpn_protocols = vec![b"h3".to_vec()];
        if let Some(k) = keylog(&cfg.keylog)? {
            tls.key_log = k;
        }
        let crypto = Arc::new(QuicServerConfig::try_from(tls).map_err(|e| format!("TLS for QUIC: {e}"))?);
        let qlog_dir = if cfg.qlog_dir.is_empty() {
            None
        } else {
            std::fs::create_dir_all(&cfg.qlog_dir).map_err(|e| format!("qlog_dir {}: {e}", cfg.qlog_dir))?;
            Some(PathBuf::from(&cfg.qlog_dir))
        };
        let host: IpAddr = cfg.host.parse().map_err(|_| format!("host {:?}: not an IP address", cfg.host))?;
        let sock = std::net::UdpSocket::bind(SocketAddr::new(host, cfg.port))
            .map_err(|e| format!("listen on {}: {e}", SocketAddr::new(host, cfg.port)))?;
        let rcvbuf = set_socket_buffers(&sock, cfg.socket_buffer).map_err(|e| format!("socket buffers: {e}"))?;
        let port = sock.local_addr().map_err(|e| e.to_string())?.port();
        let server_config = server_config(&crypto, &transport, None);
        let endpoint =
            quinn::Endpoint::new(transport.endpoint_config(), Some(server_config), sock, Arc::new(quinn::TokioRuntime))
                .map_err(|e| format!("endpoint: {e}"))?;
        // What really runs: the type of the controller the factory builds.
        let running = identify_cc(cc.factory_build());
        let ready = events::Ready {
            version: version(),
            port,
            cc: running.to_string(),
            max_datagram_size: u64::from(transport.datagram_size),
            rcvbuf,
        };
        Ok(Server { endpoint, crypto, transport, resources, qlog_dir, ready })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr().expect("a bound endpoint has an address")
    }

    /// Serves until `stop` is notified, then closes every connection and
    /// waits (at most 2 s) for their ends to be reported to `report`. Each
    /// address received on `asks` is answered with `report.live`.
    pub async fn run(self, stop: Arc<Notify>, mut asks: Option<UnboundedReceiver<String>>, report: Arc<dyn Report>) {
        let mut tasks = tokio::task::JoinSet::new();
        let open = Open::default();
        loop {
            let ask = async {
                match asks.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.notified() => break,
                Some(addr) = ask => report.live(&addr, open.stats(&addr).as_ref()),
                inc = self.endpoint.accept() => {
                    let Some(inc) = inc else { break };
                    let res = self.resources.clone();
                    let crypto = self.crypto.clone();
                    let transport = self.transport;
                    let dir = self.qlog_dir.clone();
                    let report = report.clone();
                    tasks.spawn(connection(inc, res, crypto, transport, dir, report, open.clone()));
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        self.endpoint.close(quinn::VarInt::from_u32(0x100), b"server stopping"); // H3_NO_ERROR
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while tasks.join_next().await.is_some() {}
            self.endpoint.wait_idle().await;
        })
        .await;
    }
}

impl Cc {
    /// A controller as the factory builds it (for identification).
    pub fn factory_build(self) -> Box<dyn quinn::congestion::Controller> {
        self.factory().build(Instant::now(), 1200)
    }
}

fn server_config(
    crypto: &Arc<QuicServerConfig>,
    transport: &Transport,
    qlog: Option<quinn::QlogStream>,
) -> quinn::ServerConfig {
    let mut sc = quinn::ServerConfig::with_crypto(crypto.clone());
    sc.transport_config(Arc::new(transport.config(qlog)));
    sc
}

/// One connection: `open` at once, h3 until the client closes, `end` with
/// quinn's statistics once it closed.
async fn connection(
    inc: quinn::Incoming,
    res: Arc<Resources>,
    crypto: Arc<QuicServerConfig>,
    transport: Transport,
    qlog_dir: Option<PathBuf>,
    report: Arc<dyn Report>,
    open: Open,
) {
    let addr = addr_string(inc.remote_address());
    report.open(&addr);
    let mut tap = None;
    let accepted = match qlog_dir {
        Some(dir) => {
            let path = qlog_path(&dir, &inc.orig_dst_cid(), "server");
            match QlogTap::create(&path, "qb-quinn-server", Instant::now()) {
                Ok((t, stream)) => {
                    tap = Some(t);
                    inc.accept_with(Arc::new(server_config(&crypto, &transport, Some(stream))))
                }
                Err(e) => {
                    eprintln!("qb-quinn-server: {addr}: {e}");
                    inc.accept()
                }
            }
        }
        None => inc.accept(),
    };
    let conn = match accepted {
        Ok(connecting) => connecting.await,
        Err(e) => Err(e),
    };
    let conn = match conn {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qb-quinn-server: handshake with {addr}: {e}");
            report.end(&addr, &failed_stats(transport.cc));
            return;
        }
    };
    let n = open.add(&addr, &conn, tap.as_ref());
    match h3::server::builder().build::<_, bytes::Bytes>(h3_quinn::Connection::new(conn.clone())).await {
        Ok(mut h3conn) => {
            let mut reqs = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    r = h3conn.accept() => match r {
                        Ok(Some(resolver)) => {
                            reqs.spawn(request(resolver, res.clone()));
                        }
                        _ => break,
                    },
                    Some(_) = reqs.join_next(), if !reqs.is_empty() => {}
                }
            }
            conn.closed().await;
            drop(h3conn);
        }
        Err(e) => {
            eprintln!("qb-quinn-server: {addr}: HTTP/3: {e}");
            conn.close(quinn::VarInt::from_u32(0x101), b"h3 setup failed"); // H3_GENERAL_PROTOCOL_ERROR
        }
    }
    open.remove(&addr, n);
    let snap = snapshot(&conn, tap.as_ref());
    if let Some(t) = &tap {
        if let Err(e) = t.flush() {
            eprintln!("qb-quinn-server: {addr}: qlog: {e}");
        }
    }
    report.end(&addr, &snap.server_stats());
}

/// The statistics of a connection whose handshake failed: nothing measured.
fn failed_stats(cc: Cc) -> ServerStats {
    ServerStats {
        cc: cc.name().into(),
        srtt_ms: -1.0,
        rttvar_ms: -1.0,
        min_rtt_ms: -1.0,
        cwnd: -1,
        ssthresh: -1,
        bytes_in_flight: -1,
        packets_sent: -1,
        packets_lost: -1,
        bytes_lost: -1,
        pto_count: -1,
        congestion_events: None,
    }
}

type Resolver = h3::server::RequestResolver<h3_quinn::Connection, bytes::Bytes>;

/// One request: read it whole, answer with qbpeer's plan.
async fn request(resolver: Resolver, res: Arc<Resources>) {
    let Ok((req, mut stream)) = resolver.resolve_request().await else { return };
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let head = RequestHead::new(req.method().as_str(), path);
    let mut upload = Upload::new(res.wants_body(&head));
    loop {
        match stream.recv_data().await {
            Ok(Some(mut buf)) => {
                let now = Instant::now();
                while buf.has_remaining() {
                    let n = buf.chunk().len();
                    upload.data(buf.chunk(), now);
                    buf.advance(n);
                }
            }
            Ok(None) => break,
            Err(_) => return, // reset by the client, or the connection ended
        }
    }
    upload.finish(Instant::now());
    let mut plan = res.respond(&head, &upload);
    let mut resp = http::Response::builder().status(plan.status);
    for (k, v) in &plan.headers {
        resp = resp.header(*k, v.as_str());
    }
    let Ok(resp) = resp.body(()) else {
        stream.stop_stream(Code::H3_INTERNAL_ERROR);
        return;
    };
    if stream.send_response(resp).await.is_err() {
        return;
    }
    loop {
        match plan.body.next(Instant::now(), SEND_CHUNK) {
            Ok(Next::Data(d)) => {
                if stream.send_data(d).await.is_err() {
                    return;
                }
            }
            Ok(Next::Wait(t)) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
            Ok(Next::End) => break,
            Err(e) => {
                eprintln!("qb-quinn-server: {} {path}: {e}", head.method);
                stream.stop_stream(Code::H3_INTERNAL_ERROR);
                return;
            }
        }
    }
    let _ = stream.finish().await;
}

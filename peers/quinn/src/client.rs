//! The HTTP/3 client: one quinn connection, h3 requests as client.py
//! makes them, and the record of their timelines.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use qbpeer::record::{list_qlogs, timeout_error, Clock, ConnRecord, Negotiated, Record, RequestRecord};
use qbpeer::sys::{addr_string, qlog_path, set_rcvbuf};
use qbpeer::{Body, ClientRequest, Next};
use quinn::crypto::rustls::QuicClientConfig;

use crate::{keylog, negotiated_suite, root_store, snapshot, witnessed_provider, Cc, QlogTap, Transport};

/// The largest piece of upload body handed to h3 at once.
const UPLOAD_CHUNK: usize = 256 << 10;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Runs the sample `req` (already validated) and fills `rec`; returns the
/// failure, if any, which the caller puts into the record's `error`. The
/// requests stop at `req.timeout` from the clock's start (their records
/// stay, as client.py's) and the connection is closed properly.
pub async fn run(req: &ClientRequest, rec: &mut Record, clock: Clock) -> Result<(), String> {
    let cc = Cc::from_name("congestion_control", &req.congestion_control)?;
    let (max_data, max_stream_data) = req.windows();
    let transport = Transport {
        cc,
        datagram_size: req.datagram_size(),
        max_data,
        max_stream_data,
        idle_timeout: Duration::from_secs_f64(req.idle_timeout.max(1.0) * 3.0),
        max_streams: 100,
    };
    rec.config.congestion_control = cc.name().into();
    rec.config.max_datagram_size = u64::from(transport.datagram_size);
    rec.config.max_data = max_data;
    rec.config.max_stream_data = max_stream_data;
    rec.config.rcvbuf_requested = req.rcvbuf;

    let remote = resolve(&req.host, req.port).await?;
    let bind: SocketAddr = if remote.is_ipv4() { "0.0.0.0:0".parse() } else { "[::]:0".parse() }.expect("address");
    let sock = std::net::UdpSocket::bind(bind).map_err(|e| format!("UDP socket: {e}"))?;
    rec.config.rcvbuf_bytes = set_rcvbuf(&sock, req.rcvbuf).map_err(|e| format!("SO_RCVBUF: {e}"))?;
    let lport = sock.local_addr().map_err(|e| e.to_string())?.port();
    let endpoint = quinn::Endpoint::new(transport.endpoint_config(), None, sock, Arc::new(quinn::TokioRuntime))
        .map_err(|e| format!("endpoint: {e}"))?;

    let mut tap = None;
    let mut qlog = None;
    if !req.qlog_dir.is_empty() {
        std::fs::create_dir_all(&req.qlog_dir).map_err(|e| format!("qlog_dir {}: {e}", req.qlog_dir))?;
        // Named after the connection ID once it is known (see below).
        let part = Path::new(&req.qlog_dir).join(format!("qb-quinn-client-{}.sqlog.part", std::process::id()));
        let (t, s) = QlogTap::create(&part, "qb-quinn-client", clock.origin())?;
        tap = Some(t);
        qlog = Some(s);
    }

    let roots = root_store(&req.ca_pem)?;
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(witnessed_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    if let Some(k) = keylog(&req.keylog)? {
        tls.key_log = k;
    }
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| format!("TLS for QUIC: {e}"))?;
    let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
    client_config.transport_config(Arc::new(transport.config(qlog)));

    rec.conns.push(ConnRecord { remote: addr_string(remote), start: clock.now(), ..Default::default() });
    let result = session(req, rec, clock, &endpoint, client_config, remote, lport, tap.as_ref()).await;

    endpoint.close(quinn::VarInt::from_u32(0x100), b""); // H3_NO_ERROR
                                                         // Let the CONNECTION_CLOSE go out (the server reports at its receipt).
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    if let Some(t) = &tap {
        let named = t.group_id().map(|g| qlog_path(Path::new(&req.qlog_dir), &hex_bytes(&g), "client"));
        let renamed = match named {
            Some(to) => t.rename(&to),
            None => Ok(()),
        };
        if let Err(e) = t.flush().and(renamed) {
            eprintln!("qb-quinn-client: qlog: {e}");
        }
    }
    if !req.qlog_dir.is_empty() {
        rec.qlogs = Some(list_qlogs(&req.qlog_dir));
    }
    result
}

/// Hex digits back to bytes (a qlog group_id); non-hex input stays as is.
fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .unwrap_or_else(|_| s.as_bytes().to_vec())
}

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("resolving {host}: no address"))
}

/// The local address a socket towards `remote` uses (client.py's
/// source_address): the kernel's choice, no packet sent.
fn source_ip(remote: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = if remote.is_ipv4() { "0.0.0.0:0".parse().ok()? } else { "[::]:0".parse().ok()? };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(remote).ok()?;
    Some(s.local_addr().ok()?.ip())
}

#[allow(clippy::too_many_arguments)]
async fn session(
    req: &ClientRequest,
    rec: &mut Record,
    clock: Clock,
    endpoint: &quinn::Endpoint,
    config: quinn::ClientConfig,
    remote: SocketAddr,
    lport: u16,
    tap: Option<&QlogTap>,
) -> Result<(), String> {
    let connecting = endpoint.connect_with(config, remote, req.sni()).map_err(|e| format!("connect: {e}"))?;
    let limit = Duration::from_secs_f64(req.handshake_timeout);
    let conn = match tokio::time::timeout(limit, connecting).await {
        Err(_) => return Err(format!("handshake timeout ({}s)", req.handshake_timeout)),
        Ok(Err(e)) => return Err(format!("handshake failed: {e}")),
        Ok(Ok(c)) => c,
    };
    let t = clock.now();
    let local_ip = conn.local_ip().or_else(|| source_ip(remote));
    {
        let c = &mut rec.conns[0];
        c.connected = t;
        c.handshake = t;
        c.local = local_ip.map(|ip| addr_string(SocketAddr::new(ip, lport))).unwrap_or_default();
        let alpn = conn
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol)
            .map(|p| String::from_utf8_lossy(&p).into_owned())
            .unwrap_or_default();
        c.negotiated = Some(Negotiated::h3(&alpn, &negotiated_suite()));
    }

    let deadline = tokio::time::Instant::from_std(clock.origin() + Duration::from_secs_f64(req.timeout));
    let result = requests(req, rec, clock, &conn, deadline).await;
    let done = rec.requests.iter().filter(|r| r.error.is_none() && r.end > 0).count();
    let c = &mut rec.conns[0];
    c.requests = done;
    c.transport = Some(snapshot(&conn, tap).transport("client"));
    c.closed = clock.now();
    conn.close(quinn::VarInt::from_u32(0x100), b"");
    result
}

/// Progress of the connection: the last time (sample clock) any request
/// sent or received something. Timeouts count from it, as client.py's.
struct Progress(AtomicI64);

impl Progress {
    fn touch(&self, t: i64) {
        self.0.fetch_max(t, Ordering::Relaxed);
    }
    fn idle_for(&self, clock: &Clock) -> Duration {
        Duration::from_nanos((clock.now() - self.0.load(Ordering::Relaxed)).max(0) as u64)
    }
}

async fn requests(
    req: &ClientRequest,
    rec: &mut Record,
    clock: Clock,
    conn: &quinn::Connection,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    let (mut driver, send) = h3::client::builder()
        .build::<_, _, Bytes>(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| format!("HTTP/3: {e}"))?;
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let progress = Arc::new(Progress(AtomicI64::new(clock.now())));
    let ctx = Ctx { authority: req.authority(), req: Arc::new(req.clone()), clock, progress };

    let total = || format!("timeout (total, {}s)", req.timeout);
    // Cancels every request at the deadline, or once one failed.
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let cancel = Arc::new(cancel);
    let timer = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            let _ = cancel.send(true);
        })
    };
    let result = async {
        if req.warm {
            let mut warm = RequestRecord::new("/echo", 0);
            let mut c = cancelled.clone();
            tokio::select! {
                r = one(&ctx, send.clone(), &mut warm, 0) => r?,
                _ = c.wait_for(|c| *c) => return Err(total()),
            }
        }
        let plan = req.plan();
        let slots: Arc<Mutex<Vec<Option<RequestRecord>>>> = Arc::new(Mutex::new(vec![None; plan.len()]));
        let queue: Arc<Mutex<VecDeque<(usize, String)>>> = Arc::new(Mutex::new(plan.into_iter().enumerate().collect()));
        rec.measure_start = clock.now();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..req.parallelism() {
            let (ctx, send, slots, queue) = (ctx.clone(), send.clone(), slots.clone(), queue.clone());
            let mut cancelled = cancelled.clone();
            workers.spawn(async move {
                loop {
                    let Some((i, path)) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
                        return Ok(());
                    };
                    let mut r = RequestRecord::new(&path, 0);
                    // Another request failed: this one stops where it is
                    // (its record stays, without an error, as client.py's).
                    let res = tokio::select! {
                        res = one(&ctx, send.clone(), &mut r, ctx.req.upload) => Some(res),
                        _ = cancelled.wait_for(|c| *c) => None,
                    };
                    if let Some(Err(e)) = &res {
                        r.error = Some(e.clone());
                    }
                    if r.start > 0 {
                        slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    }
                    match res {
                        Some(Ok(())) => {}
                        Some(Err(e)) => return Err(e),
                        None => return Ok(()),
                    }
                }
            });
        }
        let mut first_err = None;
        while let Some(j) = workers.join_next().await {
            let err = match j {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(e) => format!("request worker: {e}"),
            };
            if first_err.is_none() {
                first_err = Some(err);
                queue.lock().unwrap_or_else(|e| e.into_inner()).clear();
                let _ = cancel.send(true);
            }
        }
        rec.measure_end = clock.now();
        if first_err.is_none() && *cancelled.borrow() {
            first_err = Some(total());
        }
        rec.requests = slots.lock().unwrap_or_else(|e| e.into_inner()).drain(..).flatten().collect();
        first_err.map_or(Ok(()), Err)
    }
    .await;
    drop(send);
    drive.abort();
    timer.abort();
    result
}

#[derive(Clone)]
struct Ctx {
    authority: String,
    req: Arc<ClientRequest>,
    clock: Clock,
    progress: Arc<Progress>,
}

/// Awaits the future `$fut` makes (anew after each second) while the
/// connection makes progress; `Err($err)` once it made none for `$limit`.
macro_rules! progressing {
    ($ctx:expr, $limit:expr, $fut:expr, $err:expr) => {
        loop {
            let left = $limit.saturating_sub($ctx.progress.idle_for(&$ctx.clock));
            if left.is_zero() {
                break Err($err);
            }
            if let Ok(v) = tokio::time::timeout(left.min(Duration::from_secs(1)), $fut).await {
                break Ok(v);
            }
        }
    };
}

/// One request with its record (`upload` bytes of POST body, 0 = GET).
async fn one(ctx: &Ctx, mut send: SendRequest, r: &mut RequestRecord, upload: u64) -> Result<(), String> {
    let path = r.path.clone();
    let mut b = http::Request::builder()
        .method(if upload > 0 { "POST" } else { "GET" })
        .uri(format!("https://{}{}", ctx.authority, path))
        .header("user-agent", "quicbench-quinn");
    if upload > 0 {
        b = b.header("content-type", "application/octet-stream").header("content-length", upload.to_string());
    }
    let request = b.body(()).map_err(|e| format!("h3 {path}: request: {e}"))?;
    r.start = ctx.clock.now();
    ctx.progress.touch(r.start);
    let mut stream = send.send_request(request).await.map_err(|e| format!("h3 {path}: {e}"))?;
    let idle = Duration::from_secs_f64(ctx.req.idle_timeout);
    if upload > 0 {
        let mut body = Body::pattern(upload);
        while let Ok(Next::Data(d)) = body.next(Instant::now(), UPLOAD_CHUNK) {
            let n = d.len() as u64;
            let sent = tokio::time::timeout(idle, stream.send_data(d)).await;
            match sent {
                Err(_) => return Err(format!("h3 {path}: no upload progress for {}s", ctx.req.idle_timeout)),
                Ok(Err(e)) => return Err(format!("h3 {path}: {e}")),
                Ok(Ok(())) => {}
            }
            r.upload_bytes += n;
            ctx.progress.touch(ctx.clock.now());
        }
    }
    stream.finish().await.map_err(|e| format!("h3 {path}: {e}"))?;
    r.sent = ctx.clock.now();

    let first = Duration::from_secs_f64(ctx.req.first_byte_timeout);
    let fb_limit = ctx.req.first_byte_timeout;
    let resp: Result<_, String> =
        progressing!(ctx, first, stream.recv_response(), timeout_error(&path, false, fb_limit));
    let resp = resp?.map_err(|e| format!("h3 {path}: {e}"))?;
    let t = ctx.clock.now();
    ctx.progress.touch(t);
    r.headers(t, resp.status().as_u16());
    let length = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let keep = upload > 0 && path.starts_with("/upload");
    let mut kept = Vec::new();
    let idle_limit = ctx.req.idle_timeout;
    loop {
        let got: Result<_, String> =
            progressing!(ctx, idle, stream.recv_data(), timeout_error(&path, true, idle_limit));
        let got = got?.map_err(|e| format!("h3 {path}: {e}"))?;
        let t = ctx.clock.now();
        let Some(mut buf) = got else { break };
        ctx.progress.touch(t);
        while buf.has_remaining() {
            let c = buf.chunk();
            r.chunk(t, c.len());
            if keep {
                kept.extend_from_slice(c);
            }
            let n = c.len();
            buf.advance(n);
        }
    }
    r.end = ctx.clock.now();
    ctx.progress.touch(r.end);
    r.check(length, &kept)
}

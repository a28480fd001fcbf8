//! The HTTP/3 client: one request (client.py's fields) in, one record out.
//!
//! It runs the request's paths over one connection, at most `parallel`
//! streams at once, on the same single-threaded loop as the server (mio
//! poll, precise timer, paced send queue), and records the connection and
//! every request on the sample's clock as quicbench's built-in client does.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use quiche::h3::NameValue;

use qbpeer::config::{check_cc, ClientRequest};
use qbpeer::record::{
    list_qlogs, timeout_error, Clock, ConnRecord, CpuStart, Negotiated, Record, RecordConfig,
    RequestRecord, TransportStats, NOT_MEASURED,
};
use qbpeer::sys::{addr_string, qlog_path, KeyLogFile};

use crate::cli::DEFAULT_CC;
use crate::io::{transmit, Timer};
use crate::pacing::earliest;
use crate::server::KeyLogWriter;
use crate::transport::{self, congestion_control, Settings, Wire, CC_NAMES};

const SOCKET: Token = Token(0);
const TIMER: Token = Token(1);

/// Upload pieces handed to quiche at once.
const UPLOAD_PIECE: usize = 256 << 10;

/// The client's main: reads the request (stdin or `file`), runs it, prints
/// the record. With `bodies`, each measured response body is also written
/// to `bodies/<request index>` (a test's means to compare bytes). Returns 0
/// whenever a record was printed, 2 when the request is unusable.
pub fn main_with(file: Option<&Path>, bodies: Option<&Path>) -> i32 {
    let text = match file {
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| format!("reading the request {}: {e}", p.display())),
        None => {
            let mut s = String::new();
            io::stdin()
                .read_to_string(&mut s)
                .map(|_| s)
                .map_err(|e| format!("reading the request: {e}"))
        }
    };
    let req = match text.and_then(|t| ClientRequest::parse(&t)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("qb-quiche-client: {e}");
            return 2;
        }
    };
    let cc = match check_cc(
        "congestion_control",
        &req.congestion_control,
        CC_NAMES,
        DEFAULT_CC,
    )
    .and_then(|n| congestion_control(&n))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qb-quiche-client: {e}");
            return 2;
        }
    };
    let (max_data, max_stream_data) = req.windows();
    let settings = Settings {
        cc,
        max_datagram_size: req.datagram_size() as usize,
        max_data,
        max_stream_data,
        idle_timeout: Duration::from_secs_f64((req.idle_timeout * 3.0).max(1.0)),
        keylog: !req.keylog.is_empty(),
    };
    if let Err(e) = transport::validate(&settings) {
        eprintln!("qb-quiche-client: {e}");
        return 2;
    }
    let mut rec = Record {
        version: transport::version(),
        config: RecordConfig {
            congestion_control: cc.name.to_string(),
            max_datagram_size: settings.max_datagram_size as u64,
            max_data,
            max_stream_data,
            rcvbuf_requested: req.rcvbuf,
            rcvbuf_bytes: 0,
        },
        ..Default::default()
    };
    rec.cpu_start = Some(CpuStart::from(qbpeer::sys::cpu_time()));
    rec.started_unix_ns = Some(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0),
    );
    let clock = Clock::start();
    if let Some(d) = bodies {
        if let Err(e) = std::fs::create_dir_all(d) {
            eprintln!("qb-quiche-client: --bodies {}: {e}", d.display());
            return 2;
        }
    }
    if let Err(e) = run(&req, &settings, &mut rec, clock, bodies) {
        rec.error = Some(e);
    }
    if !req.qlog_dir.is_empty() {
        rec.qlogs = Some(list_qlogs(&req.qlog_dir));
    }
    match serde_json::to_string(&rec) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(e) => {
            eprintln!("qb-quiche-client: record: {e}");
            1
        }
    }
}

/// A request on its way.
struct Active {
    idx: usize, // into rec.requests; usize::MAX for the warm-up request
    upload_left: u64,
    upload_off: u64,
    length: Option<u64>,
    body: Vec<u8>, // kept for /upload's report
    keep: bool,
    save: Option<std::fs::File>, // --bodies
}

/// The TLS context: the CA to verify the server with, and a callback that
/// notes the negotiated cipher suite (quiche does not expose it).
fn tls_config(req: &ClientRequest, cipher: Arc<Mutex<String>>) -> Result<quiche::Config, String> {
    use boring::ssl::{SslContextBuilder, SslInfoCallbackMode, SslMethod};
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(|e| format!("TLS: {e}"))?;
    if req.ca_pem.is_empty() {
        b.set_default_verify_paths()
            .map_err(|e| format!("TLS roots: {e}"))?;
    } else {
        let certs = boring::x509::X509::stack_from_pem(req.ca_pem.as_bytes())
            .map_err(|e| format!("ca_pem: {e}"))?;
        if certs.is_empty() {
            return Err("ca_pem holds no certificate".into());
        }
        for c in certs {
            b.cert_store_mut()
                .add_cert(c)
                .map_err(|e| format!("ca_pem: {e}"))?;
        }
    }
    b.set_info_callback(move |ssl, mode, _| {
        if mode == SslInfoCallbackMode::HANDSHAKE_DONE {
            if let Some(c) = ssl.current_cipher() {
                let name = c.standard_name().unwrap_or(c.name());
                *cipher.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
            }
        }
    });
    quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, b)
        .map_err(|e| format!("TLS: {e}"))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("resolving {host}: no address"))
}

fn run(
    req: &ClientRequest,
    settings: &Settings,
    rec: &mut Record,
    clock: Clock,
    bodies: Option<&Path>,
) -> Result<(), String> {
    let t_start = Instant::now();
    let total = Duration::from_secs_f64(req.timeout);
    let peer = resolve(&req.host, req.port)?;
    let bind: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .unwrap();
    let std_sock = std::net::UdpSocket::bind(bind).map_err(|e| format!("socket: {e}"))?;
    rec.config.rcvbuf_bytes =
        qbpeer::sys::set_rcvbuf(&std_sock, req.rcvbuf).map_err(|e| format!("SO_RCVBUF: {e}"))?;
    std_sock
        .connect(peer)
        .map_err(|e| format!("connect {peer}: {e}"))?;
    std_sock.set_nonblocking(true).map_err(|e| e.to_string())?;
    let local = std_sock.local_addr().map_err(|e| e.to_string())?;
    let mut sock = mio::net::UdpSocket::from_std(std_sock);
    let poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    poll.registry()
        .register(&mut sock, SOCKET, Interest::READABLE | Interest::WRITABLE)
        .map_err(|e| e.to_string())?;
    let timer = Timer::new(poll.registry(), TIMER).map_err(|e| format!("timer: {e}"))?;

    let cipher = Arc::new(Mutex::new(String::new()));
    let mut config = tls_config(req, Arc::clone(&cipher))?;
    transport::apply(&mut config, settings)?;
    config.verify_peer(true);
    let mut scid = [0u8; 16];
    getrandom::fill(&mut scid).map_err(|e| format!("random: {e}"))?;
    let scid = quiche::ConnectionId::from_ref(&scid);
    let mut conn = quiche::connect(Some(req.sni()), &scid, local, peer, &mut config)
        .map_err(|e| format!("quiche: {e}"))?;
    if !req.keylog.is_empty() {
        let k = KeyLogFile::open(Path::new(&req.keylog))
            .map_err(|e| format!("keylog {}: {e}", req.keylog))?;
        conn.set_keylog(Box::new(KeyLogWriter::new(Arc::new(k))));
    }
    if !req.qlog_dir.is_empty() {
        std::fs::create_dir_all(&req.qlog_dir)
            .map_err(|e| format!("qlog_dir {}: {e}", req.qlog_dir))?;
        let odcid = conn.destination_id().into_owned();
        let p = qlog_path(Path::new(&req.qlog_dir), &odcid, "client");
        let f = std::fs::File::create(&p).map_err(|e| format!("qlog {}: {e}", p.display()))?;
        conn.set_qlog(
            Box::new(io::BufWriter::new(f)),
            "quicbench quiche client".into(),
            format!("connection to {peer}"),
        );
    }
    rec.conns.push(ConnRecord {
        local: addr_string(local),
        remote: format!("{}:{}", req.host, req.port),
        start: clock.now(),
        ..Default::default()
    });
    let mut c = Client {
        wire: Wire::new(
            conn,
            &settings.cc,
            settings.max_datagram_size,
            Instant::now(),
        ),
        h3: None,
        sock,
        poll,
        timer,
        events: Events::with_capacity(64),
        buf: vec![0u8; 65535],
        blocked: false,
        local,
        clock,
        progress: Instant::now(),
        deadline_total: t_start + total,
        bodies: bodies.map(Path::to_path_buf),
    };
    let out = c.session(req, rec, &cipher);
    // Whatever happened: the transport statistics and the close.
    let now = clock.now();
    let done = rec
        .requests
        .iter()
        .filter(|r| r.error.is_none() && r.end > 0)
        .count();
    let cr = &mut rec.conns[0];
    cr.requests = done;
    cr.transport = Some(transport_stats(&c.wire, settings));
    if !c.wire.conn.is_closed() {
        let _ = c.wire.conn.close(true, 0x100, b"");
        c.wire.build(Instant::now());
        let _ = transmit(&c.sock, &mut c.wire.queue, || {
            Instant::now() + Duration::from_secs(3600)
        });
    }
    cr.closed = now;
    out.map_err(|e| {
        if Instant::now() >= c.deadline_total {
            format!("timeout (total, {}s)", req.timeout)
        } else {
            e
        }
    })
}

struct Client {
    wire: Wire,
    h3: Option<quiche::h3::Connection>,
    sock: mio::net::UdpSocket,
    poll: Poll,
    timer: Timer,
    events: Events,
    buf: Vec<u8>,
    blocked: bool,
    local: SocketAddr,
    clock: Clock,
    progress: Instant,
    deadline_total: Instant,
    bodies: Option<std::path::PathBuf>,
}

impl Client {
    /// One turn of the loop: waits for a datagram, the timer or `until`,
    /// then receives, runs quiche's timer, and (after `work`) builds and
    /// sends.
    fn wait(&mut self, until: Option<Instant>) -> Result<(), String> {
        let deadline = earliest([self.wire.deadline(), until, Some(self.deadline_total)]);
        self.timer
            .arm(deadline, Instant::now())
            .map_err(|e| format!("timer: {e}"))?;
        match self.poll.poll(&mut self.events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        for ev in self.events.iter() {
            match ev.token() {
                TIMER => self.timer.clear(),
                SOCKET if ev.is_writable() => self.blocked = false,
                _ => {}
            }
        }
        loop {
            match self.sock.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    let info = quiche::RecvInfo {
                        from,
                        to: self.local,
                    };
                    match self.wire.conn.recv(&mut self.buf[..n], info) {
                        Ok(_) | Err(quiche::Error::Done) => {}
                        Err(e) => eprintln!("qb-quiche-client: recv: {e}"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => continue,
                Err(e) => return Err(format!("recv: {e}")),
            }
        }
        self.wire.on_timer(Instant::now());
        if Instant::now() >= self.deadline_total {
            return Err("total timeout".into());
        }
        Ok(())
    }

    /// Builds and sends what the pacer allows.
    fn flush(&mut self) -> Result<(), String> {
        self.wire.build(Instant::now());
        if !self.blocked {
            let t = transmit(&self.sock, &mut self.wire.queue, Instant::now)
                .map_err(|e| format!("send: {e}"))?;
            self.blocked = t.blocked;
        }
        Ok(())
    }

    fn closed_error(&self) -> String {
        let e = self.wire.conn.peer_error().or(self.wire.conn.local_error());
        match e {
            Some(e) => format!(
                "connection closed: error 0x{:x} {}",
                e.error_code,
                String::from_utf8_lossy(&e.reason)
            ),
            None if self.wire.conn.is_timed_out() => "connection closed: idle timeout".into(),
            None => "connection closed".into(),
        }
    }

    fn session(
        &mut self,
        req: &ClientRequest,
        rec: &mut Record,
        cipher: &Mutex<String>,
    ) -> Result<(), String> {
        // The handshake.
        let hs_deadline = Instant::now() + Duration::from_secs_f64(req.handshake_timeout);
        self.flush()?;
        while !self.wire.conn.is_established() {
            if self.wire.conn.is_closed() {
                return Err(format!("handshake failed: {}", self.closed_error()));
            }
            if Instant::now() >= hs_deadline {
                return Err(format!("handshake timeout ({}s)", req.handshake_timeout));
            }
            self.wait(Some(hs_deadline))?;
            self.flush()?;
        }
        let t = self.clock.now();
        let alpn = String::from_utf8_lossy(self.wire.conn.application_proto()).into_owned();
        let cr = &mut rec.conns[0];
        cr.connected = t;
        cr.handshake = t;
        let mut neg = Negotiated::h3(&alpn, &cipher.lock().unwrap_or_else(|e| e.into_inner()));
        neg.resumed = self.wire.conn.is_resumed();
        cr.negotiated = Some(neg);
        if alpn != "h3" {
            return Err(format!("ALPN {alpn:?}, want h3"));
        }
        let h3c = quiche::h3::Config::new().map_err(|e| format!("h3: {e}"))?;
        self.h3 = Some(
            quiche::h3::Connection::with_transport(&mut self.wire.conn, &h3c)
                .map_err(|e| format!("h3: {e}"))?,
        );

        let authority = req.authority();
        if req.warm {
            let mut scratch = Vec::new();
            self.requests(
                req,
                &authority,
                &["/echo".to_string()],
                1,
                &mut scratch,
                true,
            )?;
        }
        let plan = req.plan();
        rec.measure_start = self.clock.now();
        let r = self.requests(
            req,
            &authority,
            &plan,
            req.parallelism(),
            &mut rec.requests,
            false,
        );
        rec.measure_end = self.clock.now();
        r
    }

    /// Runs `paths` with at most `parallel` in flight, recording each in
    /// `out` (in the order they start).
    fn requests(
        &mut self,
        req: &ClientRequest,
        authority: &str,
        paths: &[String],
        parallel: usize,
        out: &mut Vec<RequestRecord>,
        warm: bool,
    ) -> Result<(), String> {
        let upload = if warm { 0 } else { req.upload };
        let mut todo: VecDeque<&String> = paths.iter().collect();
        let mut active: HashMap<u64, Active> = HashMap::new();
        let mut body = vec![0u8; 65536];
        self.progress = Instant::now();
        while !todo.is_empty() || !active.is_empty() {
            let h3 = self.h3.as_mut().expect("h3 after the handshake");
            let conn = &mut self.wire.conn;
            // Start requests while there is room.
            while active.len() < parallel {
                let Some(path) = todo.front() else { break };
                let mut hdrs = vec![
                    quiche::h3::Header::new(
                        b":method",
                        if upload > 0 {
                            &b"POST"[..]
                        } else {
                            &b"GET"[..]
                        },
                    ),
                    quiche::h3::Header::new(b":scheme", b"https"),
                    quiche::h3::Header::new(b":authority", authority.as_bytes()),
                    quiche::h3::Header::new(b":path", path.as_bytes()),
                    quiche::h3::Header::new(b"user-agent", b"quicbench-quiche"),
                ];
                if upload > 0 {
                    hdrs.push(quiche::h3::Header::new(
                        b"content-type",
                        b"application/octet-stream",
                    ));
                    hdrs.push(quiche::h3::Header::new(
                        b"content-length",
                        upload.to_string().as_bytes(),
                    ));
                }
                let start = self.clock.now();
                match h3.send_request(conn, &hdrs, upload == 0) {
                    Ok(sid) => {
                        let mut r = RequestRecord::new(path, 0);
                        r.start = start;
                        if upload == 0 {
                            r.sent = start;
                        }
                        out.push(r);
                        active.insert(
                            sid,
                            Active {
                                idx: out.len() - 1,
                                upload_left: upload,
                                upload_off: 0,
                                length: None,
                                body: Vec::new(),
                                keep: upload > 0 && path.starts_with("/upload"),
                                save: match (&self.bodies, warm) {
                                    (Some(d), false) => Some(
                                        std::fs::File::create(d.join((out.len() - 1).to_string()))
                                            .map_err(|e| format!("--bodies: {e}"))?,
                                    ),
                                    _ => None,
                                },
                            },
                        );
                        todo.pop_front();
                        self.progress = Instant::now();
                    }
                    // No stream credit or room yet: try again after the
                    // next datagrams.
                    Err(quiche::h3::Error::StreamBlocked)
                    | Err(quiche::h3::Error::TransportError(quiche::Error::StreamLimit)) => break,
                    Err(e) => return Err(format!("h3 {path}: sending the request: {e}")),
                }
            }
            // Upload bodies.
            for (sid, a) in active.iter_mut() {
                while a.upload_left > 0 {
                    let n = a.upload_left.min(UPLOAD_PIECE as u64) as usize;
                    let piece =
                        qbpeer::content::pattern(a.upload_off, n.min(qbpeer::content::MAX_SLICE));
                    let fin = piece.len() as u64 == a.upload_left;
                    match h3.send_body(conn, *sid, piece, fin) {
                        Ok(w) => {
                            a.upload_left -= w as u64;
                            a.upload_off += w as u64;
                            out[a.idx].upload_bytes += w as u64;
                            self.progress = Instant::now();
                            if w < piece.len() {
                                break;
                            }
                        }
                        Err(quiche::h3::Error::Done) => break,
                        Err(e) => return Err(format!("h3 {}: upload: {e}", out[a.idx].path)),
                    }
                }
                if a.upload_left == 0 && out[a.idx].sent == 0 {
                    out[a.idx].sent = self.clock.now();
                }
            }
            // Responses.
            loop {
                match h3.poll(conn) {
                    Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                        let t = self.clock.now();
                        if let Some(a) = active.get_mut(&sid) {
                            let mut status = 0;
                            for h in &list {
                                match h.name() {
                                    b":status" => {
                                        status = std::str::from_utf8(h.value())
                                            .ok()
                                            .and_then(|s| s.parse().ok())
                                            .unwrap_or(0)
                                    }
                                    b"content-length" => {
                                        a.length = std::str::from_utf8(h.value())
                                            .ok()
                                            .and_then(|s| s.parse().ok())
                                    }
                                    _ => {}
                                }
                            }
                            out[a.idx].headers(t, status);
                            self.progress = Instant::now();
                        }
                    }
                    Ok((sid, quiche::h3::Event::Data)) => {
                        while let Ok(n) = h3.recv_body(conn, sid, &mut body) {
                            let t = self.clock.now();
                            if let Some(a) = active.get_mut(&sid) {
                                out[a.idx].chunk(t, n);
                                if a.keep && a.body.len() < 1 << 16 {
                                    a.body.extend_from_slice(&body[..n]);
                                }
                                if let Some(f) = a.save.as_mut() {
                                    std::io::Write::write_all(f, &body[..n])
                                        .map_err(|e| format!("--bodies: {e}"))?;
                                }
                            }
                            self.progress = Instant::now();
                        }
                    }
                    Ok((sid, quiche::h3::Event::Finished)) => {
                        if let Some(a) = active.remove(&sid) {
                            let r = &mut out[a.idx];
                            r.end = self.clock.now();
                            self.progress = Instant::now();
                            if let Err(e) = r.check(a.length, &a.body) {
                                r.error = Some(e.clone());
                                return Err(e);
                            }
                        }
                    }
                    Ok((sid, quiche::h3::Event::Reset(code))) => {
                        if let Some(a) = active.remove(&sid) {
                            let e = format!(
                                "h3 {}: stream reset by the server (error 0x{code:x})",
                                out[a.idx].path
                            );
                            out[a.idx].error = Some(e.clone());
                            return Err(e);
                        }
                    }
                    Ok(_) => {}
                    Err(quiche::h3::Error::Done) => break,
                    Err(e) => return Err(format!("h3: {e}")),
                }
            }
            if todo.is_empty() && active.is_empty() {
                break;
            }
            if self.wire.conn.is_closed() {
                let e = self.closed_error();
                for a in active.values() {
                    out[a.idx].error = Some(e.clone());
                }
                return Err(e);
            }
            // Progress limits: the first byte of the oldest request still
            // waiting for it, else idle.
            let waiting = active.values().any(|a| out[a.idx].first_byte == 0);
            let limit = if waiting {
                req.first_byte_timeout
            } else {
                req.idle_timeout
            };
            let until = self.progress + Duration::from_secs_f64(limit);
            if Instant::now() >= until {
                let a = active
                    .values()
                    .min_by_key(|a| a.idx)
                    .expect("a request in flight when a progress limit passes");
                let r = &mut out[a.idx];
                let e = timeout_error(&r.path, r.first_byte != 0, limit);
                r.error = Some(e.clone());
                return Err(e);
            }
            self.flush()?;
            self.wait(Some(until))?;
        }
        self.flush()
    }
}

/// The connection's statistics as `model.TransportStats` (docs/metrics.md,
/// QUIC): quiche exposes no slow-start threshold, bytes in flight,
/// congestion events or state changes; those are -1.
pub fn transport_stats(w: &Wire, s: &Settings) -> TransportStats {
    let st = w.conn.stats();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut t = TransportStats {
        kind: "quic".into(),
        side: "client".into(),
        congestion_algo: s.cc.name.to_string(),
        ssthresh_bytes: NOT_MEASURED,
        packets_sent: st.sent as i64,
        packets_lost: st.lost as i64,
        retransmits: st.lost as i64,
        bytes_retransmitted: st.lost_bytes as i64,
        congestion_events: NOT_MEASURED,
        congestion_state_changes: NOT_MEASURED,
        ..Default::default()
    };
    if let Some(p) = w.conn.path_stats().next() {
        t.smoothed_rtt_ms = ms(p.rtt);
        t.rtt_var_ms = ms(p.rttvar);
        t.min_rtt_ms = p.min_rtt.map(ms).unwrap_or(0.0);
        t.cwnd_bytes = p.cwnd as i64;
        t.pto_count = p.total_pto_count as i64;
        t.delivery_rate_bps = (p.delivery_rate as i64).saturating_mul(8);
    }
    t
}

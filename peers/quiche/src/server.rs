//! The HTTP/3 server: one thread, one UDP socket, a mio poll woken by the
//! socket, the pacing timer and the end of standard input.
//!
//! Each turn of the loop reads every datagram the socket holds and hands it
//! to its connection, runs the quiche timers that are due, lets every
//! connection's HTTP/3 layer answer what arrived and write what its
//! responses have ready, builds the datagrams the pacer allows, sends those
//! whose release time has come, and arms the timer for the earliest of every
//! connection's deadlines (quiche's timer, the next release time, the
//! pacer's next building time, the next `/stream` segment).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::{Events, Interest, Poll, Token, Waker};
use quiche::h3::NameValue;

use qbpeer::events::{Ready, ServerStats};
use qbpeer::sys::{addr_string, qlog_path, KeyLogFile};
use qbpeer::{Body, Next, RequestHead, Resources, Upload};

use crate::io::{transmit, Timer};
use crate::pacing::earliest;
use crate::transport::{self, Settings, Wire};

const SOCKET: Token = Token(0);
const TIMER: Token = Token(1);
/// The waker's token: the input ended (stop) or asked for statistics.
const WAKE: Token = Token(2);

/// The length of the connection IDs the server issues.
const SCID_LEN: usize = quiche::MAX_CONN_ID_LEN;

/// The largest piece of a body handed to quiche at once.
const CHUNK: usize = 256 << 10;

/// The server's idle timeout (aioquic's peer uses the same).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything the server needs to start, from its configuration file.
pub struct Options {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub settings: Settings,
    pub socket_buffer: usize,
    pub qlog_dir: Option<PathBuf>,
    pub keylog: Option<PathBuf>,
    pub resources: Resources,
}

/// A response being written.
struct Resp {
    body: Body,
    headers: Option<Vec<quiche::h3::Header>>, // not yet accepted by quiche
    pending: Option<Bytes>,
    fin: bool, // the body ended: only the end of the stream is left
    wait: Option<Instant>,
}

/// A request stream.
struct Req {
    head: RequestHead,
    upload: Upload,
    resp: Option<Resp>,
}

struct Conn {
    wire: Wire,
    h3: Option<quiche::h3::Connection>,
    addr: String,
    ids: Vec<quiche::ConnectionId<'static>>,
    reqs: HashMap<u64, Req>,
    reported: bool,
}

/// Runs the server until its standard input ends (or `stop` is woken),
/// printing the peer program's lines.
pub fn run(opts: Options) -> Result<(), String> {
    let mut config = transport::config(&opts.settings)?;
    config
        .load_cert_chain_from_pem_file(&opts.cert.to_string_lossy())
        .map_err(|e| format!("cert {}: {e}", opts.cert.display()))?;
    config
        .load_priv_key_from_pem_file(&opts.key.to_string_lossy())
        .map_err(|e| format!("key {}: {e}", opts.key.display()))?;
    let h3_config = quiche::h3::Config::new().map_err(|e| format!("h3 config: {e}"))?;
    let keylog = match &opts.keylog {
        Some(p) => Some(Arc::new(
            KeyLogFile::open(p).map_err(|e| format!("keylog {}: {e}", p.display()))?,
        )),
        None => None,
    };
    if let Some(d) = &opts.qlog_dir {
        std::fs::create_dir_all(d).map_err(|e| format!("qlog_dir {}: {e}", d.display()))?;
    }

    let mut poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    let std_sock = std::net::UdpSocket::bind(opts.listen)
        .map_err(|e| format!("listen {}: {e}", opts.listen))?;
    let rcvbuf = qbpeer::sys::set_socket_buffers(&std_sock, opts.socket_buffer as u64)
        .map_err(|e| format!("socket buffers: {e}"))?;
    std_sock.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut sock = mio::net::UdpSocket::from_std(std_sock);
    let local = sock.local_addr().map_err(|e| e.to_string())?;
    poll.registry()
        .register(&mut sock, SOCKET, Interest::READABLE | Interest::WRITABLE)
        .map_err(|e| e.to_string())?;
    let mut timer = Timer::new(poll.registry(), TIMER).map_err(|e| format!("timer: {e}"))?;
    // mio allows one waker per poll: it wakes for both the input's end
    // (the flag) and stats asked for (the channel).
    let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(|e| format!("waker: {e}"))?);
    let stopping = Arc::new(AtomicBool::new(false));
    let (ask_tx, asks) = mpsc::channel::<String>();
    let (w_ask, w_stop, flag) = (
        Arc::clone(&waker),
        Arc::clone(&waker),
        Arc::clone(&stopping),
    );
    qbpeer::sys::on_stdin(
        move |addr| {
            if ask_tx.send(addr).is_ok() {
                let _ = w_ask.wake();
            }
        },
        move || {
            flag.store(true, Ordering::SeqCst);
            let _ = w_stop.wake();
        },
    );

    qbpeer::events::ready(&Ready {
        version: transport::version(),
        port: local.port(),
        cc: opts.settings.cc.name.to_string(),
        max_datagram_size: opts.settings.max_datagram_size as u64,
        rcvbuf,
    });

    let mut s = State {
        conns: HashMap::new(),
        ids: HashMap::new(),
        next_key: 0,
        config,
        h3_config,
        local,
        keylog,
        qlog_dir: opts.qlog_dir.clone(),
        settings: opts.settings.clone(),
        res: opts.resources,
    };
    let mut events = Events::with_capacity(256);
    let mut buf = vec![0u8; 65535];
    let mut blocked = false;
    'serve: loop {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        for ev in events.iter() {
            match ev.token() {
                TIMER => timer.clear(),
                WAKE if stopping.load(Ordering::SeqCst) => break 'serve,
                WAKE => {
                    for addr in asks.try_iter() {
                        s.answer(&addr);
                    }
                }
                SOCKET if ev.is_writable() => blocked = false,
                _ => {}
            }
        }
        // Datagrams in.
        loop {
            match sock.recv_from(&mut buf) {
                Ok((n, from)) => s.recv(&mut buf[..n], from, Instant::now(), &sock),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => continue,
                Err(e) => return Err(format!("recv: {e}")),
            }
        }
        let now = Instant::now();
        for c in s.conns.values_mut() {
            c.wire.on_timer(now);
            c.serve(&s.res, now);
            c.wire.build(now);
            if !blocked {
                let t = transmit(&sock, &mut c.wire.queue, Instant::now)
                    .map_err(|e| format!("send: {e}"))?;
                blocked = t.blocked;
            }
        }
        s.reap();
        let deadline = earliest(s.conns.values().map(|c| c.deadline()));
        timer
            .arm(deadline, Instant::now())
            .map_err(|e| format!("timer: {e}"))?;
    }
    // Standard input ended: close every connection and leave.
    let now = Instant::now();
    for c in s.conns.values_mut() {
        let _ = c.wire.conn.close(true, 0x100, b"server stops");
        c.wire.build(now);
        let _ = transmit(&sock, &mut c.wire.queue, || {
            Instant::now() + Duration::from_secs(3600)
        });
    }
    s.reap_all();
    Ok(())
}

struct State {
    conns: HashMap<u64, Conn>,
    ids: HashMap<quiche::ConnectionId<'static>, u64>,
    next_key: u64,
    config: quiche::Config,
    h3_config: quiche::h3::Config,
    local: SocketAddr,
    keylog: Option<Arc<KeyLogFile>>,
    qlog_dir: Option<PathBuf>,
    settings: Settings,
    res: Resources,
}

impl State {
    fn recv(&mut self, pkt: &mut [u8], from: SocketAddr, now: Instant, sock: &mio::net::UdpSocket) {
        let hdr = match quiche::Header::from_slice(pkt, SCID_LEN) {
            Ok(h) => h,
            Err(_) => return, // not QUIC
        };
        let key = match self.ids.get(&hdr.dcid) {
            Some(k) => *k,
            None => {
                if hdr.ty != quiche::Type::Initial {
                    return;
                }
                if !quiche::version_is_supported(hdr.version) {
                    let mut out = [0u8; 1500];
                    if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
                        let _ = sock.send_to(&out[..n], from);
                    }
                    return;
                }
                match self.accept(&hdr, from, now) {
                    Ok(k) => {
                        qbpeer::events::open(&self.conns[&k].addr);
                        k
                    }
                    Err(e) => {
                        eprintln!("quiche peer: accept {from}: {e}");
                        return;
                    }
                }
            }
        };
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let info = quiche::RecvInfo {
            from,
            to: self.local,
        };
        if let Err(e) = c.wire.conn.recv(pkt, info) {
            if e != quiche::Error::Done {
                eprintln!("quiche peer: {}: recv: {e}", c.addr);
            }
        }
        // New connection IDs quiche issued for itself.
        if c.wire.conn.is_established() && c.h3.is_none() {
            match quiche::h3::Connection::with_transport(&mut c.wire.conn, &self.h3_config) {
                Ok(h3) => c.h3 = Some(h3),
                Err(e) => {
                    eprintln!("quiche peer: {}: h3: {e}", c.addr);
                    let _ = c.wire.conn.close(false, 0x101, b"h3 setup failed");
                }
            }
        }
    }

    fn accept(
        &mut self,
        hdr: &quiche::Header,
        from: SocketAddr,
        now: Instant,
    ) -> Result<u64, String> {
        // Short headers carry no length: every ID this server issues is
        // SCID_LEN bytes long, the length recv parses them with.
        let mut raw = [0u8; SCID_LEN];
        getrandom::fill(&mut raw).map_err(|e| format!("random: {e}"))?;
        let scid = quiche::ConnectionId::from_vec(raw.to_vec());
        let mut conn = quiche::accept(&scid, None, self.local, from, &mut self.config)
            .map_err(|e| e.to_string())?;
        if let Some(k) = &self.keylog {
            conn.set_keylog(Box::new(KeyLogWriter::new(Arc::clone(k))));
        }
        if let Some(d) = &self.qlog_dir {
            let name = qlog_path(d, &hdr.dcid, "server");
            match File::create(&name) {
                Ok(f) => conn.set_qlog(
                    Box::new(io::BufWriter::new(f)),
                    "quicbench quiche server".into(),
                    format!("connection from {from}"),
                ),
                Err(e) => eprintln!("quiche peer: qlog {}: {e}", name.display()),
            }
        }
        let key = self.next_key;
        self.next_key += 1;
        let odcid = hdr.dcid.clone().into_owned();
        self.ids.insert(scid.clone(), key);
        self.ids.insert(odcid.clone(), key);
        self.conns.insert(
            key,
            Conn {
                wire: Wire::new(
                    conn,
                    &self.settings.cc,
                    self.settings.max_datagram_size,
                    now,
                ),
                h3: None,
                addr: addr_string(from),
                ids: vec![scid, odcid],
                reqs: HashMap::new(),
                reported: false,
            },
        );
        Ok(key)
    }

    /// Answers a stats line: the open connection from `addr` (the newest
    /// when several came from it), or none.
    fn answer(&self, addr: &str) {
        let open = self
            .conns
            .iter()
            .filter(|(_, c)| c.addr == addr && !c.reported)
            .max_by_key(|(k, _)| **k);
        match open {
            Some((_, c)) => qbpeer::events::live(addr, Some(&stats(&c.wire, &self.settings))),
            None => qbpeer::events::live(addr, None),
        }
    }

    /// Reports connections the peer closed and forgets closed ones.
    fn reap(&mut self) {
        let mut gone = Vec::new();
        for (k, c) in self.conns.iter_mut() {
            if !c.reported && (c.wire.conn.is_draining() || c.wire.conn.is_closed()) {
                c.reported = true;
                qbpeer::events::end(&c.addr, &stats(&c.wire, &self.settings));
            }
            if c.wire.conn.is_closed() {
                if std::env::var_os("QB_QUICHE_SENDLOG").is_some() {
                    eprintln!("quiche peer: {}: {}", c.addr, c.wire.pacing_report());
                }
                gone.push(*k);
            }
        }
        for k in gone {
            if let Some(c) = self.conns.remove(&k) {
                for id in c.ids {
                    self.ids.remove(&id);
                }
            }
        }
    }

    fn reap_all(&mut self) {
        for c in self.conns.values_mut() {
            if !c.reported {
                c.reported = true;
                qbpeer::events::end(&c.addr, &stats(&c.wire, &self.settings));
            }
        }
        self.conns.clear();
        self.ids.clear();
    }
}

impl Conn {
    fn deadline(&self) -> Option<Instant> {
        let waits = self
            .reqs
            .values()
            .filter_map(|r| r.resp.as_ref().and_then(|p| p.wait));
        earliest([self.wire.deadline(), waits.min()])
    }

    /// Reads what HTTP/3 has for us, answers finished requests and writes
    /// the responses that have room.
    fn serve(&mut self, res: &Resources, now: Instant) {
        let Some(h3) = self.h3.as_mut() else { return };
        let conn = &mut self.wire.conn;
        let mut body = [0u8; 65536];
        loop {
            match h3.poll(conn) {
                Ok((sid, quiche::h3::Event::Headers { list, more_frames })) => {
                    let mut method = String::new();
                    let mut path = String::new();
                    for h in &list {
                        match h.name() {
                            b":method" if method.is_empty() => {
                                method = String::from_utf8_lossy(h.value()).into()
                            }
                            b":path" if path.is_empty() => {
                                path = String::from_utf8_lossy(h.value()).into()
                            }
                            _ => {}
                        }
                    }
                    if method.is_empty() {
                        method = "GET".into();
                    }
                    if path.is_empty() {
                        path = "/".into();
                    }
                    let head = RequestHead::new(method, path);
                    let upload = Upload::new(res.wants_body(&head));
                    let mut req = Req {
                        head,
                        upload,
                        resp: None,
                    };
                    if !more_frames {
                        req.upload.finish(now);
                        req.resp = Some(start(res, &req));
                    }
                    self.reqs.insert(sid, req);
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    while let Ok(n) = h3.recv_body(conn, sid, &mut body) {
                        if let Some(r) = self.reqs.get_mut(&sid) {
                            r.upload.data(&body[..n], now);
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if let Some(r) = self.reqs.get_mut(&sid) {
                        if r.resp.is_none() {
                            r.upload.finish(now);
                            r.resp = Some(start(res, r));
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Reset(_))) => {
                    self.reqs.remove(&sid);
                }
                Ok((_, _)) => {}
                Err(quiche::h3::Error::Done) => break,
                Err(e) => {
                    eprintln!("quiche peer: {}: h3: {e}", self.addr);
                    break;
                }
            }
        }
        // Write every response that has something to write.
        let mut done = Vec::new();
        for (sid, r) in self.reqs.iter_mut() {
            if let Some(p) = r.resp.as_mut() {
                match pump(h3, conn, *sid, p, now) {
                    Pump::Finished | Pump::Gone => done.push(*sid),
                    Pump::More => {}
                }
            }
        }
        for sid in done {
            self.reqs.remove(&sid);
        }
    }
}

/// A request whose body has been read: its response plan.
fn start(res: &Resources, r: &Req) -> Resp {
    let plan = res.respond(&r.head, &r.upload);
    let mut headers = vec![quiche::h3::Header::new(
        b":status",
        plan.status.to_string().as_bytes(),
    )];
    for (k, v) in &plan.headers {
        headers.push(quiche::h3::Header::new(k.as_bytes(), v.as_bytes()));
    }
    Resp {
        body: plan.body,
        headers: Some(headers),
        pending: None,
        fin: false,
        wait: None,
    }
}

enum Pump {
    More,
    Finished,
    Gone,
}

/// Writes as much of a response as its stream takes now.
fn pump(
    h3: &mut quiche::h3::Connection,
    conn: &mut quiche::Connection,
    sid: u64,
    p: &mut Resp,
    now: Instant,
) -> Pump {
    if let Some(t) = p.wait {
        if t > now {
            return Pump::More;
        }
        p.wait = None;
    }
    if let Some(hs) = &p.headers {
        let end = p.body.is_empty();
        match h3.send_response(conn, sid, hs, end) {
            Ok(()) => {
                p.headers = None;
                if end {
                    return Pump::Finished;
                }
            }
            Err(quiche::h3::Error::StreamBlocked) | Err(quiche::h3::Error::Done) => {
                return Pump::More
            }
            Err(_) => return Pump::Gone,
        }
    }
    loop {
        if let Some(b) = p.pending.take() {
            match h3.send_body(conn, sid, &b, false) {
                Ok(n) if n == b.len() => {}
                Ok(n) => {
                    p.pending = Some(b.slice(n..));
                    return Pump::More;
                }
                Err(quiche::h3::Error::Done) => {
                    p.pending = Some(b);
                    return Pump::More;
                }
                Err(_) => return Pump::Gone,
            }
        }
        if p.fin {
            return match h3.send_body(conn, sid, b"", true) {
                Ok(_) => Pump::Finished,
                Err(quiche::h3::Error::Done) => Pump::More,
                Err(_) => Pump::Gone,
            };
        }
        let room = match conn.stream_capacity(sid) {
            Ok(0) => return Pump::More,
            Ok(n) => n.min(CHUNK),
            Err(_) => return Pump::Gone,
        };
        match p.body.next(now, room) {
            Ok(Next::Data(b)) => p.pending = Some(b),
            Ok(Next::Wait(t)) => {
                p.wait = Some(t);
                return Pump::More;
            }
            Ok(Next::End) => p.fin = true,
            Err(e) => {
                eprintln!("quiche peer: stream {sid}: {e}");
                let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, 0x102);
                return Pump::Gone;
            }
        }
    }
}

/// The statistics of a connection's end line (the aioquic peer's fields).
/// quiche exposes neither the slow-start threshold nor the bytes in
/// flight: they are -1.
pub fn stats(w: &Wire, s: &Settings) -> ServerStats {
    let st = w.conn.stats();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut out = ServerStats {
        cc: s.cc.name.to_string(),
        ssthresh: -1,
        bytes_in_flight: -1,
        packets_sent: st.sent as i64,
        packets_lost: st.lost as i64,
        bytes_lost: st.lost_bytes as i64,
        ..Default::default()
    };
    if let Some(p) = w.conn.path_stats().next() {
        out.srtt_ms = ms(p.rtt);
        out.rttvar_ms = ms(p.rttvar);
        out.min_rtt_ms = p.min_rtt.map(ms).unwrap_or(0.0);
        out.cwnd = p.cwnd as i64;
        out.pto_count = p.total_pto_count as i64;
    }
    out
}

/// A key log writer for one connection: quiche writes each secret's line
/// in pieces; whole lines go to the shared file.
pub struct KeyLogWriter {
    file: Arc<KeyLogFile>,
    line: Vec<u8>,
}

impl KeyLogWriter {
    pub fn new(file: Arc<KeyLogFile>) -> KeyLogWriter {
        KeyLogWriter {
            file,
            line: Vec::new(),
        }
    }
}

impl io::Write for KeyLogWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        for &c in b {
            self.line.push(c);
            if c == b'\n' {
                self.file.write_line(&self.line);
                self.line.clear();
            }
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

//! System helpers both peers need: UDP socket buffers, the process's CPU
//! time, an NSS key log file, qlog file names, address formatting and the
//! server's stop signal (the end of standard input).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn setsockopt_int(fd: i32, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: fd is an open socket owned by the caller; the value is a
    // c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: i32, opt: libc::c_int) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above; v and len outlive the call.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, opt, &mut v as *mut libc::c_int as *mut libc::c_void, &mut len)
    };
    if r == 0 {
        Ok(v.max(0) as u64)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks for a receive buffer of `want` bytes: SO_RCVBUFFORCE (root, beyond
/// net.core.rmem_max), else SO_RCVBUF (capped by rmem_max). 0 leaves the
/// default. Returns SO_RCVBUF as the kernel reports it (twice the usable
/// size, by Linux's bookkeeping).
pub fn set_rcvbuf(sock: &impl AsRawFd, want: u64) -> io::Result<u64> {
    let fd = sock.as_raw_fd();
    if want > 0 {
        let v = want.min(i32::MAX as u64) as libc::c_int;
        if setsockopt_int(fd, libc::SO_RCVBUFFORCE, v).is_err() {
            setsockopt_int(fd, libc::SO_RCVBUF, v)?;
        }
    }
    getsockopt_int(fd, libc::SO_RCVBUF)
}

/// Asks for a send buffer of `want` bytes (SO_SNDBUFFORCE, else
/// SO_SNDBUF); returns SO_SNDBUF as the kernel reports it.
pub fn set_sndbuf(sock: &impl AsRawFd, want: u64) -> io::Result<u64> {
    let fd = sock.as_raw_fd();
    if want > 0 {
        let v = want.min(i32::MAX as u64) as libc::c_int;
        if setsockopt_int(fd, libc::SO_SNDBUFFORCE, v).is_err() {
            setsockopt_int(fd, libc::SO_SNDBUF, v)?;
        }
    }
    getsockopt_int(fd, libc::SO_SNDBUF)
}

/// Both buffers of a server socket (`socket_buffer`); returns the
/// receive buffer the kernel reports.
pub fn set_socket_buffers(sock: &impl AsRawFd, want: u64) -> io::Result<u64> {
    set_sndbuf(sock, want)?;
    set_rcvbuf(sock, want)
}

/// CPU time of this process (getrusage RUSAGE_SELF: all its threads).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CpuTime {
    pub user_ns: i64,
    pub sys_ns: i64,
}

/// The CPU time this process has used so far.
pub fn cpu_time() -> CpuTime {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    // time_t and suseconds_t are i64 here, narrower on some targets.
    #[allow(clippy::unnecessary_cast)]
    let ns = |t: libc::timeval| t.tv_sec as i64 * 1_000_000_000 + t.tv_usec as i64 * 1000;
    CpuTime { user_ns: ns(ru.ru_utime), sys_ns: ns(ru.ru_stime) }
}

/// A TLS key log file in the NSS format Wireshark reads
/// (`LABEL <client_random hex> <secret hex>` per line), appended to and
/// shared by every connection of the process.
#[derive(Debug)]
pub struct KeyLogFile {
    file: Mutex<File>,
}

impl KeyLogFile {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<KeyLogFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(KeyLogFile { file: Mutex::new(file) })
    }

    /// Appends one secret.
    pub fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let line = format!("{label} {} {}\n", hex::encode(client_random), hex::encode(secret));
        self.write_line(line.as_bytes());
    }

    /// Appends a line already in the NSS format (BoringSSL's key log
    /// callback hands whole lines; a newline is added when missing).
    pub fn write_line(&self, line: &[u8]) {
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line);
        if !line.ends_with(b"\n") {
            let _ = f.write_all(b"\n");
        }
    }
}

/// The qlog file of a connection: `<dir>/<odcid hex>_<role>.sqlog` (qlog
/// JSON-SEQ, named as quic-go names its files; the ODCID is the original
/// destination connection ID, role "client" or "server").
pub fn qlog_path(dir: &Path, odcid: &[u8], role: &str) -> PathBuf {
    dir.join(format!("{}_{role}.sqlog", hex::encode(odcid)))
}

/// An address as Go prints it: "ip:port", IPv6 in brackets, IPv4-mapped
/// IPv6 addresses as IPv4 (what the Go side's book keys by).
pub fn addr_string(a: SocketAddr) -> String {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => format!("{v4}:{}", v6.port()),
            None => format!("[{}]:{}", v6.ip(), v6.port()),
        },
        SocketAddr::V4(v4) => v4.to_string(),
    }
}

/// Reads standard input line by line from a thread of its own: each
/// address asked for with a stats line (`{"stats":"ip:port"}`, see
/// [`crate::events::stats_request`]) goes to `ask`, and `stop` is called
/// once the input ends (the wrapper's quit). Other lines are ignored.
pub fn on_stdin(mut ask: impl FnMut(String) + Send + 'static, stop: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut line = String::new();
        loop {
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if let Some(addr) = crate::events::stats_request(&line) {
                        ask(addr);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => continue, // not UTF-8
                Err(_) => break,
            }
        }
        stop();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_buffers_grow() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = set_rcvbuf(&s, 0).unwrap();
        let after = set_socket_buffers(&s, 4 << 20).unwrap();
        assert!(before > 0);
        // Without privileges the kernel caps at rmem_max; it never shrinks.
        assert!(after >= before.min(4 << 20), "{before} -> {after}");
    }

    #[test]
    fn cpu_time_moves() {
        let a = cpu_time();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = cpu_time();
        assert!(b.user_ns + b.sys_ns > a.user_ns + a.sys_ns);
    }

    #[test]
    fn keylog_lines() {
        let p = std::env::temp_dir().join(format!("qbpeer-keylog-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let k = KeyLogFile::open(&p).unwrap();
        k.log("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &[1, 2], &[0xab]);
        k.write_line(b"SERVER_TRAFFIC_SECRET_0 00 ff");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET 0102 ab\nSERVER_TRAFFIC_SECRET_0 00 ff\n"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn names_and_addresses() {
        assert_eq!(qlog_path(Path::new("/q"), &[0xde, 0xad], "server"), PathBuf::from("/q/dead_server.sqlog"));
        assert_eq!(addr_string("10.0.0.1:443".parse().unwrap()), "10.0.0.1:443");
        assert_eq!(addr_string("[::ffff:10.0.0.1]:443".parse().unwrap()), "10.0.0.1:443");
        assert_eq!(addr_string("[::1]:443".parse().unwrap()), "[::1]:443");
    }
}

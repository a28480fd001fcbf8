//! The event loop's system parts: a precise one-shot timer (timerfd on
//! CLOCK_MONOTONIC, the clock of `std::time::Instant`) registered in a mio
//! poll, and the send path that writes a connection's due datagrams.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

use crate::pacing::SendQueue;

/// A one-shot timer with nanosecond resolution that wakes a mio poll.
pub struct Timer {
    fd: TimerFd,
    armed: Option<Instant>,
}

impl Timer {
    /// A timer registered under `token`. It also asks the kernel for a
    /// timer slack of 1 us for this thread (the default 50 us would blur the
    /// pacing of fast links).
    pub fn new(registry: &Registry, token: Token) -> io::Result<Timer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let _ = nix::sys::prctl::set_timerslack(1000);
        registry.register(
            &mut SourceFd(&fd.as_fd().as_raw_fd()),
            token,
            Interest::READABLE,
        )?;
        Ok(Timer { fd, armed: None })
    }

    /// Arms the timer for `deadline` (None disarms it). A deadline at or
    /// before `now` fires at once.
    pub fn arm(&mut self, deadline: Option<Instant>, now: Instant) -> io::Result<()> {
        if deadline == self.armed {
            return Ok(());
        }
        self.armed = deadline;
        match deadline {
            None => self.fd.unset().map_err(io::Error::from),
            Some(t) => {
                let d = t
                    .saturating_duration_since(now)
                    .max(Duration::from_nanos(1));
                self.fd
                    .set(
                        Expiration::OneShot(TimeSpec::from_duration(d)),
                        TimerSetTimeFlags::empty(),
                    )
                    .map_err(io::Error::from)
            }
        }
    }

    /// Clears a fired timer (after its poll event).
    pub fn clear(&mut self) {
        let _ = self.fd.wait(); // non-blocking read of the expiry count
        self.armed = None;
    }
}

/// What [`transmit`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Transmitted {
    pub datagrams: usize,
    /// The socket's buffer was full: wait for it to become writable.
    pub blocked: bool,
}

/// Sends every datagram of `q` that is due at `now()` through `sock`. It
/// reads the clock per datagram, so that its lateness record is true.
pub fn transmit(
    sock: &mio::net::UdpSocket,
    q: &mut SendQueue,
    now: impl Fn() -> Instant,
) -> io::Result<Transmitted> {
    let mut out = Transmitted::default();
    while let Some(d) = q.pop_due(now()) {
        match sock.send_to(&d.data, d.to) {
            Ok(_) => {
                q.record(d.at, now(), d.data.len());
                out.datagrams += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                q.unpop(d);
                out.blocked = true;
                break;
            }
            // ICMP errors of an earlier datagram, an unreachable peer: the
            // datagram is lost, as on a network; QUIC recovers or times out.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(
                        libc::ECONNREFUSED
                            | libc::EHOSTUNREACH
                            | libc::ENETUNREACH
                            | libc::EPERM
                            | libc::ENOBUFS
                    )
                ) =>
            {
                q.record(d.at, now(), d.data.len());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

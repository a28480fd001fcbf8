//! Pacing: when a connection may build its next packet, and when each built
//! packet leaves.
//!
//! quiche computes no send times itself for Reno and CUBIC (its `SendInfo.at`
//! is always "now" with them) and paces only BBRv2 (`bbr2_gcongestion`),
//! whose pacer stamps every packet with a release time (`SendInfo.at`) and
//! tells, before a packet is built, when the next one is due
//! (`Connection::get_next_release_time`). This module does the rest:
//!
//! * [`Gate`] decides whether a connection may build a packet now. For BBRv2
//!   it follows quiche's pacer: build while the next release time is less
//!   than a horizon ahead (`Connection::max_release_into_future`, 1/8 of the
//!   smoothed RTT, 1 to 5 ms), as Cloudflare's own tokio-quiche does. For
//!   Reno and CUBIC it is the application's pacer, [`TokenBucket`]: RFC 9002
//!   section 7.7's rate of 1.25 x cwnd / smoothed RTT (quic-go's and quiche's
//!   own former pacer's factor), with a burst of at most ten full-size
//!   datagrams (the initial window) after an idle period.
//! * [`SendQueue`] holds the built datagrams of one connection in order, each
//!   with its release time, and yields a datagram only once that time has
//!   come: no datagram leaves before its `at`.
//!
//! Every function takes the current time as an argument (an injected clock):
//! the tests drive them with made-up instants.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Datagrams due within this much of now leave together (quiche's own
/// `ReleaseDecision::EQUAL_THRESHOLD`): a timer wakeup costs more than the
/// spacing it would keep.
pub const SLACK: Duration = Duration::from_micros(50);

/// The application's pacing rate multiplier over cwnd / smoothed RTT
/// (RFC 9002 section 7.7, N = 1.25).
pub const RATE_FACTOR: f64 = 1.25;

/// Full-size datagrams the token bucket lets out at once after an idle
/// period: the initial congestion window (RFC 9002 section 7.7 "limit bursts
/// to the initial congestion window").
pub const BURST_PACKETS: usize = 10;

/// The application's pacer for congestion controllers quiche does not pace
/// (Reno, CUBIC): a token bucket of bytes refilled at [`RATE_FACTOR`] x cwnd
/// / smoothed RTT, holding at most [`BURST_PACKETS`] full-size datagrams.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    mss: usize,
    capacity: f64,
    tokens: f64,
    rate: f64, // bytes per second
    last: Instant,
}

impl TokenBucket {
    /// A full bucket for datagrams of at most `mss` bytes.
    pub fn new(mss: usize, now: Instant) -> Self {
        let capacity = (BURST_PACKETS * mss) as f64;
        TokenBucket {
            mss,
            capacity,
            tokens: capacity,
            rate: 0.0,
            last: now,
        }
    }

    /// Sets the rate from the congestion window (bytes) and the smoothed
    /// RTT; a zero RTT (none measured yet) leaves the rate unlimited.
    pub fn set_window(&mut self, cwnd: usize, srtt: Duration, now: Instant) {
        self.refill(now);
        self.rate = if srtt.is_zero() {
            0.0
        } else {
            RATE_FACTOR * cwnd as f64 / srtt.as_secs_f64()
        };
    }

    /// The pacing rate in bytes per second; 0 means unlimited.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            if self.rate > 0.0 {
                let dt = now.duration_since(self.last).as_secs_f64();
                self.tokens = (self.tokens + dt * self.rate).min(self.capacity);
            } else {
                self.tokens = self.capacity;
            }
            self.last = now;
        }
    }

    /// None when a full-size datagram may leave now, else the time when it
    /// may.
    pub fn wait_until(&mut self, now: Instant) -> Option<Instant> {
        self.refill(now);
        let need = self.mss as f64 - self.tokens;
        if need <= 0.0 || self.rate <= 0.0 {
            return None;
        }
        let wait = Duration::from_secs_f64(need / self.rate);
        if wait <= SLACK {
            return None;
        }
        Some(now + wait)
    }

    /// Takes `bytes` out of the bucket (it may go negative: a datagram
    /// never waits twice).
    pub fn on_sent(&mut self, bytes: usize, now: Instant) {
        self.refill(now);
        self.tokens -= bytes as f64;
    }
}

/// Who decides when a connection may build its next packet.
#[derive(Debug, Clone)]
pub enum Gate {
    /// No pacing at all: build whenever quiche has something, send at once
    /// (`QB_QUICHE_PACING=off`, for experiments that show what pacing
    /// changes; never the default).
    Off,
    /// quiche's own pacer (BBRv2): `SendInfo.at` and
    /// `get_next_release_time`, built at most `max_release_into_future`
    /// ahead.
    Quiche,
    /// The application's token bucket (Reno, CUBIC).
    App(TokenBucket),
}

impl Gate {
    /// The gate for a congestion controller: quiche's pacer when quiche
    /// paces it, the token bucket otherwise.
    pub fn new(quiche_paces: bool, mss: usize, now: Instant) -> Self {
        if std::env::var("QB_QUICHE_PACING").as_deref() == Ok("off") {
            Gate::Off
        } else if quiche_paces {
            Gate::Quiche
        } else {
            Gate::App(TokenBucket::new(mss, now))
        }
    }

    /// A short name for the pacer, as reported in the peer's statistics.
    pub fn name(&self) -> &'static str {
        match self {
            Gate::Off => "off",
            Gate::Quiche => "quiche",
            Gate::App(_) => "app",
        }
    }
}

/// Whether a packet may be built now under quiche's pacer: None if so, else
/// the time to try again. `next_release` is quiche's next release time
/// (`ReleaseDecision::time(now)`, None when it is now or past) and
/// `horizon` its `max_release_into_future`. Built packets are queued until
/// their release time, so a packet due within the horizon may be built now;
/// one due later waits until it is 80 % of the horizon away (as
/// tokio-quiche).
pub fn quiche_gate(
    next_release: Option<Instant>,
    horizon: Duration,
    now: Instant,
) -> Option<Instant> {
    let t = next_release?;
    if t.saturating_duration_since(now) < horizon {
        return None;
    }
    Some(t.checked_sub(horizon.mul_f32(0.8)).unwrap_or(now).max(now))
}

/// One datagram waiting for its release time.
#[derive(Debug)]
pub struct Queued {
    pub at: Instant,
    pub data: Vec<u8>,
    pub to: std::net::SocketAddr,
}

/// The datagrams of one connection waiting for their release times, in the
/// order quiche built them. Release times are made non-decreasing (a
/// datagram never overtakes an earlier one), so the head is always the next
/// to leave.
#[derive(Default)]
pub struct SendQueue {
    q: VecDeque<Queued>,
    bytes: usize,
    /// Datagrams that left, and how late they left in total (for the
    /// pacing report).
    pub sent: u64,
    pub late_total: Duration,
    pub late_max: Duration,
    /// A log of every datagram's release and departure time (see
    /// [`SendLog`]).
    pub log: Option<SendLog>,
}

impl std::fmt::Debug for SendQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendQueue")
            .field("len", &self.q.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// A text log of departures, one line per datagram: its release time, the
/// time it left (nanoseconds since the log's origin) and its length. The
/// measurement of pacing reads it (`QB_QUICHE_SENDLOG=DIR`: one file per
/// connection).
pub struct SendLog {
    origin: Instant,
    out: std::io::BufWriter<std::fs::File>,
}

impl SendLog {
    /// A log in `dir` named `name`, when the environment asks for one.
    pub fn from_env(name: &str) -> Option<SendLog> {
        let dir = std::env::var_os("QB_QUICHE_SENDLOG")?;
        let f = std::fs::File::create(std::path::Path::new(&dir).join(format!("{name}.sendlog")))
            .ok()?;
        Some(SendLog {
            origin: Instant::now(),
            out: std::io::BufWriter::new(f),
        })
    }

    fn write(&mut self, at: Instant, now: Instant, len: usize) {
        use std::io::Write;
        let ns = |t: Instant| t.saturating_duration_since(self.origin).as_nanos();
        let _ = writeln!(self.out, "{} {} {len}", ns(at), ns(now));
    }
}

impl SendQueue {
    /// An empty queue that logs its departures to `log`, if any.
    pub fn with_log(log: Option<SendLog>) -> SendQueue {
        SendQueue {
            log,
            ..SendQueue::default()
        }
    }

    /// Queues a datagram built now to leave at `at` (or right after the
    /// datagram before it, whichever is later).
    pub fn push(&mut self, at: Instant, data: Vec<u8>, to: std::net::SocketAddr) {
        let at = match self.q.back() {
            Some(last) if last.at > at => last.at,
            _ => at,
        };
        self.bytes += data.len();
        self.q.push_back(Queued { at, data, to });
    }

    /// The release time of the next datagram.
    pub fn next_release(&self) -> Option<Instant> {
        self.q.front().map(|d| d.at)
    }

    /// The next datagram if it is due (its release time is at most
    /// [`SLACK`] away).
    pub fn pop_due(&mut self, now: Instant) -> Option<Queued> {
        if self.q.front()?.at > now + SLACK {
            return None;
        }
        let d = self.q.pop_front()?;
        self.bytes -= d.data.len();
        Some(d)
    }

    /// Puts back a datagram the socket did not take (it leaves first).
    pub fn unpop(&mut self, d: Queued) {
        self.bytes += d.data.len();
        self.q.push_front(d);
    }

    /// Records that a datagram of `len` bytes due at `at` left at `now`.
    pub fn record(&mut self, at: Instant, now: Instant, len: usize) {
        if let Some(l) = self.log.as_mut() {
            l.write(at, now, len);
        }
        let late = now.saturating_duration_since(at);
        self.sent += 1;
        self.late_total += late;
        self.late_max = self.late_max.max(late);
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The earliest of some optional instants.
pub fn earliest<I: IntoIterator<Item = Option<Instant>>>(times: I) -> Option<Instant> {
    times.into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn addr() -> SocketAddr {
        "127.0.0.1:4433".parse().unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn queue_releases_in_order_and_never_early() {
        let t0 = Instant::now();
        let mut q = SendQueue::default();
        q.push(t0 + ms(2), vec![1], addr());
        // built later with an earlier time: must not overtake
        q.push(t0 + ms(1), vec![2], addr());
        q.push(t0 + ms(5), vec![3; 10], addr());
        assert_eq!(q.len(), 3);
        assert_eq!(q.bytes(), 12);
        assert_eq!(q.next_release(), Some(t0 + ms(2)));
        assert!(q.pop_due(t0).is_none(), "released 2 ms early");
        assert!(q.pop_due(t0 + ms(1)).is_none(), "released 1 ms early");
        let a = q.pop_due(t0 + ms(2)).unwrap();
        assert_eq!(a.data, vec![1]);
        // the second was clamped to the first's time
        let b = q.pop_due(t0 + ms(2)).unwrap();
        assert_eq!(b.data, vec![2]);
        assert_eq!(b.at, t0 + ms(2));
        assert!(q.pop_due(t0 + ms(4)).is_none());
        // within SLACK of its time it leaves
        let c = q.pop_due(t0 + ms(5) - SLACK).unwrap();
        assert_eq!(c.data.len(), 10);
        assert!(q.is_empty());
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn queue_unpop_puts_back_first() {
        let t0 = Instant::now();
        let mut q = SendQueue::default();
        q.push(t0, vec![1], addr());
        q.push(t0, vec![2], addr());
        let a = q.pop_due(t0).unwrap();
        q.unpop(a);
        assert_eq!(q.pop_due(t0).unwrap().data, vec![1]);
        assert_eq!(q.pop_due(t0).unwrap().data, vec![2]);
    }

    #[test]
    fn queue_records_lateness() {
        let t0 = Instant::now();
        let mut q = SendQueue::default();
        q.record(t0, t0 + ms(3), 100);
        q.record(t0 + ms(5), t0 + ms(4), 100); // early: counts as 0
        assert_eq!(q.sent, 2);
        assert_eq!(q.late_total, ms(3));
        assert_eq!(q.late_max, ms(3));
    }

    #[test]
    fn bucket_bursts_then_paces() {
        let t0 = Instant::now();
        let mss = 1000;
        let mut b = TokenBucket::new(mss, t0);
        // 1.25 * 100 kB / 100 ms = 1.25 MB/s: 800 us per datagram
        b.set_window(100_000, ms(100), t0);
        assert!((b.rate() - 1.25e6).abs() < 1.0);
        for i in 0..BURST_PACKETS {
            assert_eq!(b.wait_until(t0), None, "burst datagram {i} held back");
            b.on_sent(mss, t0);
        }
        let next = b
            .wait_until(t0)
            .expect("the 11th datagram of a burst went out at once");
        assert_eq!(next.duration_since(t0), Duration::from_micros(800));
        // at that time it may go, and the one after waits another 800 us
        assert_eq!(b.wait_until(next), None);
        b.on_sent(mss, next);
        let after = b.wait_until(next).unwrap();
        assert_eq!(after.duration_since(next), Duration::from_micros(800));
    }

    #[test]
    fn bucket_refills_to_capacity_only() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, t0);
        b.set_window(100_000, ms(100), t0);
        for _ in 0..BURST_PACKETS {
            b.on_sent(1000, t0);
        }
        // idle for a second: the bucket holds one burst again, not 1250
        let t1 = t0 + Duration::from_secs(1);
        let mut n = 0;
        while b.wait_until(t1).is_none() {
            b.on_sent(1000, t1);
            n += 1;
            assert!(n <= BURST_PACKETS, "more than a burst after idling");
        }
        assert_eq!(n, BURST_PACKETS);
    }

    #[test]
    fn bucket_without_rtt_is_unlimited() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, t0);
        b.set_window(14_520, Duration::ZERO, t0);
        for _ in 0..100 {
            assert_eq!(b.wait_until(t0), None);
            b.on_sent(1000, t0);
        }
    }

    #[test]
    fn bucket_rate_follows_window() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, t0);
        for _ in 0..BURST_PACKETS {
            b.on_sent(1000, t0);
        }
        b.set_window(10_000, ms(10), t0); // 1.25 MB/s: 800 us
        let slow = b.wait_until(t0).unwrap().duration_since(t0);
        b.set_window(100_000, ms(10), t0); // 12.5 MB/s: 80 us
        let fast = b.wait_until(t0).unwrap().duration_since(t0);
        assert_eq!(slow, Duration::from_micros(800));
        assert_eq!(fast, Duration::from_micros(80));
    }

    #[test]
    fn quiche_gate_builds_within_horizon() {
        let t0 = Instant::now();
        let h = ms(2);
        assert_eq!(quiche_gate(None, h, t0), None);
        assert_eq!(quiche_gate(Some(t0 + ms(1)), h, t0), None);
        // 10 ms ahead: wait until 80 % of the horizon before it
        let again = quiche_gate(Some(t0 + ms(10)), h, t0).unwrap();
        assert_eq!(again, t0 + ms(10) - h.mul_f32(0.8));
        // exactly at the horizon: wait (but never into the past)
        let at_h = quiche_gate(Some(t0 + h), h, t0).unwrap();
        assert!(at_h >= t0 && at_h < t0 + h);
    }

    #[test]
    fn earliest_ignores_none() {
        let t0 = Instant::now();
        assert_eq!(
            earliest([None, Some(t0 + ms(3)), Some(t0 + ms(1)), None]),
            Some(t0 + ms(1))
        );
        assert_eq!(earliest([None, None]), None);
    }
}

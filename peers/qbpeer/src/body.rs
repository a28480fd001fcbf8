//! Response bodies as pull sources, independent of any I/O or runtime.
//!
//! A [`Body`] yields the bytes of one response in chunks: the stack's HTTP/3
//! layer asks for the next chunk when its stream can take more (its own
//! backpressure), so nothing is buffered beyond one chunk. Timed bodies
//! (`/stream`) answer [`Next::Wait`] with the instant the next segment is
//! due; the caller sleeps (or arms a timer) and asks again. The clock is
//! the caller's: every call passes `now`, so tests inject time.

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::content::{pattern, PngFrame, PNG_PAD_CHUNK};

/// What a body yields next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// The next bytes of the body (never empty).
    Data(Bytes),
    /// Nothing before this instant: the next `/stream` segment is due then.
    Wait(Instant),
    /// The body is complete.
    End,
}

/// The body of a response.
#[derive(Debug)]
pub struct Body {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Empty,
    Bytes(Bytes),
    Pattern(PatternSrc),
    Png(Box<PngSrc>),
    File(FileSrc),
    Stream(StreamSrc),
}

/// `n` pattern bytes from offset `off`.
#[derive(Debug)]
struct PatternSrc {
    off: u64,
    left: u64,
}

impl PatternSrc {
    fn next(&mut self, max: usize) -> Option<Bytes> {
        if self.left == 0 {
            return None;
        }
        let n = (self.left.min(max as u64)) as usize;
        let b = Bytes::from_static(pattern(self.off, n));
        self.off += b.len() as u64;
        self.left -= b.len() as u64;
        Some(b)
    }
}

#[derive(Debug)]
struct PngSrc {
    stage: u8, // 0 head + chunk header, 1 padding, 2 crc + tail, 3 done
    frame_head: Bytes,
    frame_tail: Vec<u8>,
    pad: PatternSrc,
    crc: crc32fast::Hasher,
}

#[derive(Debug)]
struct FileSrc {
    file: File,
    left: u64,
}

/// `/stream`: `segments` segments of `size` pattern bytes (consecutive
/// offsets), segment i due at start + i*interval, start being the first
/// call (the moment the headers went out).
#[derive(Debug)]
struct StreamSrc {
    segments: u64,
    interval: Duration,
    size: u64,
    start: Option<Instant>,
    index: u64,
    seg_left: u64,
    off: u64,
}

impl Body {
    /// No body.
    pub fn empty() -> Body {
        Body { kind: Kind::Empty }
    }

    /// A body held in memory.
    pub fn bytes(b: impl Into<Bytes>) -> Body {
        let b = b.into();
        if b.is_empty() {
            return Body::empty();
        }
        Body { kind: Kind::Bytes(b) }
    }

    /// `n` pattern bytes (offsets 0..n), as `/bytes/N`.
    pub fn pattern(n: u64) -> Body {
        Body { kind: Kind::Pattern(PatternSrc { off: 0, left: n }) }
    }

    /// A page object of exactly `size` bytes (`content.WriteObject`): a
    /// valid PNG when `size >= frame.min_size()`, else pattern bytes.
    pub fn page_object(size: u64, frame: &PngFrame) -> Body {
        let min = frame.min_size();
        if size < min {
            return Body::pattern(size);
        }
        let pad = size - min;
        let mut head = Vec::with_capacity(frame.head.len() + 8);
        head.extend_from_slice(&frame.head);
        head.extend_from_slice(&(pad as u32).to_be_bytes());
        head.extend_from_slice(PNG_PAD_CHUNK);
        let mut crc = crc32fast::Hasher::new();
        crc.update(PNG_PAD_CHUNK);
        Body {
            kind: Kind::Png(Box::new(PngSrc {
                stage: 0,
                frame_head: Bytes::from(head),
                frame_tail: frame.tail.clone(),
                pad: PatternSrc { off: 0, left: pad },
                crc,
            })),
        }
    }

    /// The `size` bytes of an open file, read as the stream takes them.
    pub fn file(file: File, size: u64) -> Body {
        if size == 0 {
            return Body::empty();
        }
        Body { kind: Kind::File(FileSrc { file, left: size }) }
    }

    /// `/stream`'s body: `segments` segments of `size` bytes, `interval`
    /// apart, with no drift (segment i is due at start + i*interval).
    pub fn stream(segments: u64, interval: Duration, size: u64) -> Body {
        Body {
            kind: Kind::Stream(StreamSrc { segments, interval, size, start: None, index: 0, seg_left: size, off: 0 }),
        }
    }

    /// The body's length when it is known in advance (`None` for
    /// `/stream`, which is sent without Content-Length).
    pub fn len(&self) -> Option<u64> {
        match &self.kind {
            Kind::Empty => Some(0),
            Kind::Bytes(b) => Some(b.len() as u64),
            Kind::Pattern(p) => Some(p.left),
            Kind::Png(p) => Some(p.frame_head.len() as u64 + p.pad.left + 4 + p.frame_tail.len() as u64),
            Kind::File(f) => Some(f.left),
            Kind::Stream(_) => None,
        }
    }

    /// Whether the body has no bytes at all: the headers end the stream.
    pub fn is_empty(&self) -> bool {
        matches!(self.kind, Kind::Empty)
    }

    /// The next chunk of at most `max` bytes (at least 1 is always
    /// allowed), the instant to wait for, or the end. `now` is the
    /// caller's clock. A file that shrank while it was sent is an error.
    pub fn next(&mut self, now: Instant, max: usize) -> std::io::Result<Next> {
        let max = max.max(1);
        let data = match &mut self.kind {
            Kind::Empty => None,
            Kind::Bytes(b) => {
                if b.is_empty() {
                    None
                } else {
                    let n = b.len().min(max);
                    Some(b.split_to(n))
                }
            }
            Kind::Pattern(p) => p.next(max),
            Kind::Png(p) => png_next(p, max),
            Kind::File(f) => {
                if f.left == 0 {
                    None
                } else {
                    let n = f.left.min(max as u64) as usize;
                    let mut buf = vec![0u8; n];
                    let got = f.file.read(&mut buf)?;
                    if got == 0 {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the file shrank while it was sent",
                        ));
                    }
                    buf.truncate(got);
                    f.left -= got as u64;
                    Some(Bytes::from(buf))
                }
            }
            Kind::Stream(s) => return Ok(stream_next(s, now, max)),
        };
        Ok(match data {
            Some(b) => Next::Data(b),
            None => Next::End,
        })
    }
}

fn png_next(p: &mut PngSrc, max: usize) -> Option<Bytes> {
    loop {
        match p.stage {
            0 => {
                if p.frame_head.is_empty() {
                    p.stage = 1;
                    continue;
                }
                let n = p.frame_head.len().min(max);
                return Some(p.frame_head.split_to(n));
            }
            1 => match p.pad.next(max) {
                Some(b) => {
                    p.crc.update(&b);
                    return Some(b);
                }
                None => {
                    let crc = std::mem::take(&mut p.crc).finalize();
                    let mut t = Vec::with_capacity(4 + p.frame_tail.len());
                    t.extend_from_slice(&crc.to_be_bytes());
                    t.extend_from_slice(&p.frame_tail);
                    p.frame_head = Bytes::from(t); // reused as the rest to send
                    p.stage = 2;
                }
            },
            2 => {
                if p.frame_head.is_empty() {
                    p.stage = 3;
                    continue;
                }
                let n = p.frame_head.len().min(max);
                return Some(p.frame_head.split_to(n));
            }
            _ => return None,
        }
    }
}

fn stream_next(s: &mut StreamSrc, now: Instant, max: usize) -> Next {
    let start = *s.start.get_or_insert(now);
    if s.seg_left == 0 {
        if s.index + 1 >= s.segments {
            return Next::End;
        }
        let due = start + s.interval.saturating_mul((s.index + 1).min(u32::MAX as u64) as u32);
        if now < due {
            return Next::Wait(due);
        }
        s.index += 1;
        s.seg_left = s.size;
    }
    let n = s.seg_left.min(max as u64) as usize;
    let b = Bytes::from_static(pattern(s.off, n));
    s.off += b.len() as u64;
    s.seg_left -= b.len() as u64;
    Next::Data(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{check_pattern, PngFrame};

    fn drain(mut b: Body, max: usize) -> Vec<u8> {
        let now = Instant::now();
        let mut out = Vec::new();
        loop {
            match b.next(now, max).unwrap() {
                Next::Data(d) => {
                    assert!(!d.is_empty() && d.len() <= max);
                    out.extend_from_slice(&d)
                }
                Next::End => return out,
                Next::Wait(_) => panic!("untimed body waits"),
            }
        }
    }

    #[test]
    fn pattern_body_any_chunk_size() {
        for n in [0u64, 1, 7, 65535, 65536, 65537, 3 * 65536 + 12345] {
            for max in [1usize, 1000, 65536, 1 << 20] {
                if n > 100_000 && max == 1 {
                    continue;
                }
                let b = Body::pattern(n);
                assert_eq!(b.len(), Some(n));
                let got = drain(b, max);
                assert_eq!(got.len() as u64, n);
                assert!(check_pattern(0, &got).is_ok());
            }
        }
    }

    /// Walks the PNG chunks of `b`, checking lengths and CRCs, and returns
    /// the chunk types.
    fn png_chunks(b: &[u8]) -> Vec<String> {
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        let mut i = 8;
        let mut types = Vec::new();
        while i < b.len() {
            let len = u32::from_be_bytes(b[i..i + 4].try_into().unwrap()) as usize;
            let typ = &b[i + 4..i + 8];
            let data = &b[i + 8..i + 8 + len];
            let crc = u32::from_be_bytes(b[i + 8 + len..i + 12 + len].try_into().unwrap());
            let mut h = crc32fast::Hasher::new();
            h.update(typ);
            h.update(data);
            assert_eq!(h.finalize(), crc, "CRC of chunk {}", String::from_utf8_lossy(typ));
            types.push(String::from_utf8_lossy(typ).into_owned());
            i += 12 + len;
        }
        assert_eq!(i, b.len());
        types
    }

    #[test]
    fn page_objects_are_pngs_of_exact_size() {
        let f = PngFrame::default();
        for size in [83u64, 84, 400, 8000, 128 << 10, (1 << 20) + 77] {
            for max in [5usize, 4096, 1 << 20] {
                let b = Body::page_object(size, &f);
                assert_eq!(b.len(), Some(size));
                let got = drain(b, max);
                assert_eq!(got.len() as u64, size);
                assert_eq!(png_chunks(&got), ["IHDR", "IDAT", "qbPd", "IEND"]);
                // The padding is the pattern from offset 0.
                let pad_start = f.head.len() + 8;
                assert!(check_pattern(0, &got[pad_start..pad_start + (size - 83) as usize]).is_ok());
            }
        }
        // Below the PNG minimum: raw pattern bytes.
        let small = drain(Body::page_object(82, &f), 1000);
        assert_eq!(small.len(), 82);
        assert!(check_pattern(0, &small).is_ok());
    }

    #[test]
    fn stream_schedule_has_no_drift() {
        let t0 = Instant::now();
        let iv = Duration::from_millis(50);
        let mut b = Body::stream(3, iv, 1500);
        assert_eq!(b.len(), None);
        let mut got = Vec::new();
        // Segment 0 at once, in chunks of 1000.
        for want in [1000usize, 500] {
            match b.next(t0, 1000).unwrap() {
                Next::Data(d) => {
                    assert_eq!(d.len(), want);
                    got.extend_from_slice(&d);
                }
                other => panic!("{other:?}"),
            }
        }
        // Segment 1 is due at t0+50ms, whenever segment 0 finished.
        assert_eq!(b.next(t0 + Duration::from_millis(10), 1000).unwrap(), Next::Wait(t0 + iv));
        assert_eq!(b.next(t0 + Duration::from_millis(49), 1000).unwrap(), Next::Wait(t0 + iv));
        // Late: segment 1 is sent at 70ms, segment 2 is still due at 100ms.
        let late = t0 + Duration::from_millis(70);
        for _ in 0..2 {
            match b.next(late, 1000).unwrap() {
                Next::Data(d) => got.extend_from_slice(&d),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(b.next(late, 1000).unwrap(), Next::Wait(t0 + 2 * iv));
        let t2 = t0 + 2 * iv;
        while let Next::Data(d) = b.next(t2, 4096).unwrap() {
            got.extend_from_slice(&d);
        }
        assert_eq!(b.next(t2, 4096).unwrap(), Next::End);
        // Three segments of consecutive pattern offsets.
        assert_eq!(got.len(), 4500);
        assert!(check_pattern(0, &got).is_ok());
    }

    #[test]
    fn stream_zero_interval_never_waits() {
        let t0 = Instant::now();
        let mut b = Body::stream(4, Duration::ZERO, 10);
        let mut n = 0;
        loop {
            match b.next(t0, 100).unwrap() {
                Next::Data(d) => n += d.len(),
                Next::End => break,
                Next::Wait(_) => panic!("waits"),
            }
        }
        assert_eq!(n, 40);
    }

    #[test]
    fn file_body_reads_and_detects_shrinking() {
        let dir = std::env::temp_dir().join(format!("qbpeer-body-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        std::fs::write(&p, b"hello world").unwrap();
        let got = drain(Body::file(File::open(&p).unwrap(), 11), 4);
        assert_eq!(got, b"hello world");
        let mut b = Body::file(File::open(&p).unwrap(), 20);
        let now = Instant::now();
        assert!(matches!(b.next(now, 100).unwrap(), Next::Data(_)));
        assert!(b.next(now, 100).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

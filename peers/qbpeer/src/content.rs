//! The bytes quicbench's servers send, as package `endpoint/content` of
//! quicbench defines them: the payload pattern, sizes as URLs write them
//! (`content.ParseSize`), Go durations (`time.ParseDuration`, for
//! `/stream?interval=`), synthetic pages (`content.Page`) and the framing of
//! their PNG objects.
//!
//! Everything here is deterministic and byte-identical to the Go code; the
//! tests pin the values the Go code produces.

use std::fmt;
use std::sync::OnceLock;

/// Period of the payload pattern (bytes). A power of two: an offset reduces
/// with a mask.
pub const BLOCK_SIZE: usize = 1 << 16;

/// The largest slice [`pattern`] returns at once.
pub const MAX_SLICE: usize = 1 << 20;

/// The largest size [`parse_size`] accepts (1 TiB), `content.MaxSize`.
pub const MAX_SIZE: u64 = 1 << 40;

/// The largest number of objects a page may reference
/// (`content.MaxPageObjects`).
pub const MAX_PAGE_OBJECTS: usize = 10000;

/// The beginning of every PNG page object quicbench's server sends
/// (signature, IHDR of a 1x1 8-bit grey image, IDAT), as
/// `content.PNGFrame` returns it. The server's configuration carries it too
/// (`png_head`); this copy serves tests and `--check`.
pub const PNG_HEAD_HEX: &str = "89504e470d0a1a0a0000000d49484452000000010000000108000000003a7e9b550000000e4944415478da626800040000ffff00820081e09d1e0c";

/// The end of every PNG page object (the IEND chunk), `content.PNGFrame`'s
/// tail.
pub const PNG_TAIL_HEX: &str = "0000000049454e44ae426082";

/// The private ancillary chunk type that pads a PNG object to its size.
pub const PNG_PAD_CHUNK: &[u8; 4] = b"qbPd";

/// One period of the pattern followed by as many periods as make
/// `MAX_SLICE + BLOCK_SIZE` bytes, so that any slice of up to `MAX_SLICE`
/// bytes at any offset is a plain sub-slice.
fn pattern_buffer() -> &'static [u8] {
    static BUF: OnceLock<Vec<u8>> = OnceLock::new();
    BUF.get_or_init(|| {
        let mut block = vec![0u8; BLOCK_SIZE];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for chunk in block.chunks_exact_mut(8) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        block.repeat(MAX_SLICE / BLOCK_SIZE + 1)
    })
}

/// The pattern bytes at offsets `off..off+n` of every generated body
/// (`content.Pattern`); `n` is capped at [`MAX_SLICE`]. The slice is static:
/// wrap it in `bytes::Bytes::from_static` to send it without copying.
pub fn pattern(off: u64, n: usize) -> &'static [u8] {
    let start = (off as usize) & (BLOCK_SIZE - 1);
    &pattern_buffer()[start..start + n.min(MAX_SLICE)]
}

/// The pattern byte at offset `off`.
pub fn pattern_byte(off: u64) -> u8 {
    pattern_buffer()[(off as usize) & (BLOCK_SIZE - 1)]
}

/// Checks that `data` is the pattern at offsets `off..`; returns the first
/// offset that differs.
pub fn check_pattern(off: u64, data: &[u8]) -> Result<(), u64> {
    let mut done = 0usize;
    while done < data.len() {
        let n = (data.len() - done).min(MAX_SLICE);
        let want = pattern(off + done as u64, n);
        if want != &data[done..done + n] {
            let i = want.iter().zip(&data[done..]).position(|(a, b)| a != b).unwrap_or(0);
            return Err(off + (done + i) as u64);
        }
        done += n;
    }
    Ok(())
}

/// A value quoted as Go's `%q` quotes an ASCII string (the error messages
/// of quicbench's server quote what they reject this way).
pub struct GoQuote<'a>(pub &'a str);

impl fmt::Display for GoQuote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if (c as u32) < 0x20 || c == '\u{7f}' => write!(f, "\\x{:02x}", c as u32)?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("\"")
    }
}

fn q(s: &str) -> GoQuote<'_> {
    GoQuote(s)
}

/// Go's `unicode.IsLetter(rune(b))` for one byte (Latin-1).
fn byte_is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == 0xAA || b == 0xB5 || b == 0xBA || (b >= 0xC0 && b != 0xD7 && b != 0xF7)
}

/// Go's `strings.TrimSpace` on ASCII and Unicode white space.
fn trim_space(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace())
}

const SIZE_UNITS: [(&str, u64); 9] = [
    ("B", 1),
    ("KB", 1000),
    ("MB", 1000 * 1000),
    ("GB", 1000 * 1000 * 1000),
    ("TB", 1000 * 1000 * 1000 * 1000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Parses a decimal number of the form `[+-]?(d+.?d*|.d+)` into
/// (negative, digits as an integer, count of fraction digits); `None` when
/// malformed or too long to be exact.
fn parse_decimal(num: &str) -> Option<(bool, u128, u32)> {
    let (neg, body) = match num.as_bytes().first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Trailing zeros of the fraction do not change the value.
    let frac = frac.trim_end_matches('0');
    let mut v: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
    }
    Some((neg, v, frac.len() as u32))
}

/// `model.ParseSize`: a non-negative number with an optional unit (B, KB,
/// MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024;
/// case-insensitive), a whole number of bytes.
fn model_parse_size(s: &str) -> Result<u64, String> {
    let t = trim_space(s);
    if t.is_empty() {
        return Err("empty size".into());
    }
    let i = t.bytes().position(|b| !(b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'+')).unwrap_or(t.len());
    let (num, unit) = (&t[..i], trim_space(&t[i..]));
    if num.is_empty() {
        return Err(format!("size {} does not start with a number", q(s)));
    }
    let malformed = || format!("malformed number {} in size", q(num));
    if num.matches('.').count() > 1 || num[1..].contains(['+', '-']) {
        return Err(malformed());
    }
    let Some((neg, digits, frac)) = parse_decimal(num) else {
        return Err(if num.len() > 30 { format!("size {} is too large", q(s)) } else { malformed() });
    };
    let mult = if unit.is_empty() {
        1
    } else {
        match SIZE_UNITS.iter().find(|(n, _)| n.eq_ignore_ascii_case(unit)) {
            Some((_, m)) => *m,
            None => {
                return Err(format!("unknown size unit {} (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", q(unit)))
            }
        }
    };
    let value = digits.checked_mul(u128::from(mult));
    if neg && digits != 0 {
        return Err("size must not be negative".into());
    }
    let Some(value) = value else {
        return Err(format!("size {} is too large", q(s)));
    };
    let den = 10u128.checked_pow(frac);
    let whole = match den {
        Some(d) if value % d == 0 => value / d,
        _ => return Err(format!("size {} is not a whole number of bytes", q(s))),
    };
    if whole > i64::MAX as u128 {
        return Err(format!("size {} is too large", q(s)));
    }
    Ok(whole as u64)
}

/// `content.ParseSize`: a byte count as URLs and flags write it:
/// `model.ParseSize` plus the one-letter units k, M, G, T (powers of 1000),
/// without a sign, at most [`MAX_SIZE`]. Examples: "512", "8KB", "1.5MiB",
/// "10m". The error messages are the Go code's.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let mut t = trim_space(s).to_string();
    if t.starts_with('+') {
        return Err(format!("size {}: want a number without a sign", q(s)));
    }
    let b = t.as_bytes();
    let mut i = b.len();
    while i > 0 && byte_is_letter(b[i - 1]) {
        i -= 1;
    }
    if b.len() - i == 1 && b"kKmMgGtT".contains(&b[i]) {
        t.push('B');
    }
    let n = model_parse_size(&t)?;
    if n > MAX_SIZE {
        return Err(format!("size {} exceeds the maximum of 1 TiB", q(s)));
    }
    Ok(n)
}

/// Go's `time.ParseDuration`, in nanoseconds: "50ms", "1.5s", "1m30s",
/// "0", "-2h". Units ns, us (µs, μs), ms, s, m, h.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let err = || format!("time: invalid duration {}", q(s));
    let mut rest = s;
    let mut neg = false;
    if let Some(r) = rest.strip_prefix('-') {
        neg = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(err());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac = &r[..n];
            rest = &r[n..];
        }
        if int.is_empty() && frac.is_empty() {
            return Err(err());
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3600 * 1_000_000_000,
            "" => return Err(format!("time: missing unit in duration {}", q(s))),
            _ => return Err(format!("time: unknown unit {} in duration {}", q(unit), q(s))),
        };
        let mut v: u128 = 0;
        for b in int.bytes() {
            v = v.checked_mul(10).and_then(|v| v.checked_add(u128::from(b - b'0'))).ok_or_else(err)?;
        }
        let mut ns = v.checked_mul(scale).ok_or_else(err)?;
        // The fraction, truncated to whole nanoseconds as Go does.
        let mut f_scale = scale;
        for b in frac.bytes() {
            if f_scale < 10 {
                break;
            }
            f_scale /= 10;
            ns += u128::from(b - b'0') * f_scale;
        }
        total = total.checked_add(ns).ok_or_else(err)?;
        if total > i64::MAX as u128 + u128::from(neg) {
            return Err(err());
        }
    }
    Ok(if neg { (total as i128).wrapping_neg() as i64 } else { total as i64 })
}

/// Go's `strconv.Atoi` on a decimal integer with an optional sign.
pub fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Go's `html.EscapeString`.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

/// splitmix64, which draws the size of a page object from its index.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A synthetic web page (`content.Page`): an HTML document referencing
/// `objects` images; object i is `min_size` bytes when the bounds are
/// equal, else a deterministic size in `[min_size, max_size]` drawn from i.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub objects: usize,
    pub min_size: u64,
    pub max_size: u64,
}

impl Page {
    /// `content.ParsePage`: the two path segments of `/page/N/S`; S is a
    /// size or an inclusive range "MIN-MAX" (each bound parsed alone).
    pub fn parse(n: &str, s: &str) -> Result<Page, String> {
        let objects = match atoi(n) {
            Some(v) if (0..=MAX_PAGE_OBJECTS as i64).contains(&v) => v as usize,
            _ => return Err(format!("page object count {}: want an integer from 0 to {MAX_PAGE_OBJECTS}", q(n))),
        };
        match s.split_once('-') {
            None => {
                let size = parse_size(s).map_err(|e| format!("page object size: {e}"))?;
                Ok(Page { objects, min_size: size, max_size: size })
            }
            Some((lo, hi)) => {
                let range_err = |e: String| format!("page object size range {}: {e}", q(s));
                let max_size = parse_size(hi).map_err(range_err)?;
                let min_size = parse_size(lo).map_err(range_err)?;
                if min_size > max_size {
                    return Err(format!("page object size range {}: lower bound above upper bound", q(s)));
                }
                Ok(Page { objects, min_size, max_size })
            }
        }
    }

    /// The size of object i (`Page.ObjectSize`).
    pub fn object_size(&self, i: usize) -> u64 {
        if self.min_size == self.max_size {
            return self.min_size;
        }
        let span = self.max_size - self.min_size + 1;
        self.min_size + splitmix64(i as u64) % span
    }

    /// The summed size of the objects (the document excluded).
    pub fn total_bytes(&self) -> u64 {
        (0..self.objects).map(|i| self.object_size(i)).sum()
    }

    /// The page served at `page_path` (`Page.HTML`), byte for byte.
    pub fn html(&self, page_path: &str) -> Vec<u8> {
        let title = html_escape(&format!("quicbench page: {} objects", self.objects));
        let mut b = String::with_capacity(200 + self.objects * 60);
        b.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        b.push_str("<link rel=\"icon\" href=\"data:,\">\n");
        b.push_str(&format!("<title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n"));
        for i in 0..self.objects {
            b.push_str(&format!(
                "<img src=\"{}\" width=\"1\" height=\"1\" alt=\"\">\n",
                html_escape(&object_path(page_path, i))
            ));
        }
        b.push_str("</body></html>\n");
        b.into_bytes()
    }
}

/// The URL path of object i of the page at `page_path`
/// (`content.ObjectPath`: one trailing slash dropped).
pub fn object_path(page_path: &str, i: usize) -> String {
    format!("{}/{i}.png", page_path.strip_suffix('/').unwrap_or(page_path))
}

/// The fixed bytes around the padding chunk of every PNG page object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PngFrame {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Default for PngFrame {
    /// quicbench's frame (the Go code's, [`PNG_HEAD_HEX`] and
    /// [`PNG_TAIL_HEX`]).
    fn default() -> Self {
        PngFrame::from_hex(PNG_HEAD_HEX, PNG_TAIL_HEX).expect("built-in PNG frame")
    }
}

impl PngFrame {
    /// The frame from the hex strings of the server configuration.
    pub fn from_hex(head: &str, tail: &str) -> Result<PngFrame, String> {
        let head = hex::decode(head).map_err(|e| format!("png_head: not hex: {e}"))?;
        let tail = hex::decode(tail).map_err(|e| format!("png_tail: not hex: {e}"))?;
        if !head.starts_with(b"\x89PNG\r\n\x1a\n") {
            return Err("png_head: does not start with the PNG signature".into());
        }
        if tail.len() < 12 {
            return Err("png_tail: shorter than an IEND chunk".into());
        }
        Ok(PngFrame { head, tail })
    }

    /// The smallest object served as a PNG (`content.MinPNGSize`): smaller
    /// objects are raw pattern bytes.
    pub fn min_size(&self) -> u64 {
        (self.head.len() + 12 + self.tail.len()) as u64
    }

    /// The Content-Type of an object of `size` bytes (`content.ObjectType`).
    pub fn object_type(&self, size: u64) -> &'static str {
        if size >= self.min_size() {
            "image/png"
        } else {
            "application/octet-stream"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_matches_the_go_block() {
        // The first bytes of content.block, as Go computes them.
        let want = {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes()
        };
        assert_eq!(pattern(0, 8), &want);
        // The pattern repeats with period BLOCK_SIZE, at any offset.
        for off in [0u64, 1, 7, 65535, 65536, 65537, 3 * 65536 + 12345, (1 << 40) - 3] {
            let p = pattern(off, 1000);
            for (i, b) in p.iter().enumerate() {
                assert_eq!(*b, pattern_byte(off + i as u64), "offset {off}+{i}");
                assert_eq!(*b, pattern_byte(off + i as u64 + BLOCK_SIZE as u64));
            }
        }
        assert_eq!(pattern(5, MAX_SLICE + 100).len(), MAX_SLICE);
        assert_eq!(pattern(BLOCK_SIZE as u64 - 1, MAX_SLICE).len(), MAX_SLICE);
        assert!(check_pattern(70000, pattern(70000, 5000)).is_ok());
        let mut bad = pattern(70000, 5000).to_vec();
        bad[42] ^= 1;
        assert_eq!(check_pattern(70000, &bad), Err(70042));
    }

    #[test]
    fn parse_size_accepts_what_go_accepts() {
        let good: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("8KB", 8000),
            ("8kb", 8000),
            ("8k", 8000),
            ("1MiB", 1 << 20),
            ("1.5MiB", 3 << 19),
            ("10m", 10_000_000),
            ("3 MB", 3_000_000),
            ("2GiB", 2 << 30),
            ("100B", 100),
            ("1TiB", 1 << 40),
            (" 1.50KB ", 1500),
            (".5KB", 500),
            ("1.KB", 1000),
            ("-0", 0),
            ("1000000000000", 1_000_000_000_000),
        ];
        for (s, want) in good {
            assert_eq!(parse_size(s), Ok(*want), "{s:?}");
        }
        for s in [
            "",
            "-1",
            "KB",
            "1.5",
            "0x10",
            "1e3",
            "2TiB",
            "9999999999999999999",
            "12 apples",
            "+5",
            ".",
            "1..2",
            "1-2",
            "1.2.3KB",
            "5 kilobytes",
        ] {
            assert!(parse_size(s).is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn parse_size_errors_read_as_go_s() {
        assert_eq!(parse_size("+5").unwrap_err(), "size \"+5\": want a number without a sign");
        assert_eq!(parse_size("").unwrap_err(), "empty size");
        assert_eq!(parse_size("-1").unwrap_err(), "size must not be negative");
        assert_eq!(parse_size("1.5").unwrap_err(), "size \"1.5\" is not a whole number of bytes");
        assert_eq!(parse_size("2TiB").unwrap_err(), "size \"2TiB\" exceeds the maximum of 1 TiB");
        assert_eq!(parse_size("KB").unwrap_err(), "size \"KB\" does not start with a number");
        assert_eq!(parse_size("1-2").unwrap_err(), "malformed number \"1-2\" in size");
        assert_eq!(
            parse_size("12 apples").unwrap_err(),
            "unknown size unit \"apples\" (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        );
        assert_eq!(parse_size("9999999999999999999").unwrap_err(), "size \"9999999999999999999\" is too large");
    }

    #[test]
    fn parse_duration_as_go() {
        let good: &[(&str, i64)] = &[
            ("0", 0),
            ("50ms", 50_000_000),
            ("1.5s", 1_500_000_000),
            ("1m30s", 90_000_000_000),
            ("-2h", -7_200_000_000_000),
            ("+1us", 1000),
            ("1\u{b5}s", 1000),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
            ("1.0000000005s", 1_000_000_000),
            ("100ns", 100),
        ];
        for (s, want) in good {
            assert_eq!(parse_duration(s), Ok(*want), "{s:?}");
        }
        for s in ["", "5", "x", "1d", ".s", "1.2.3s", "-", "9999999999h"] {
            assert!(parse_duration(s).is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn page_parse_sizes_and_html() {
        let p = Page::parse("5", "8KB").unwrap();
        assert_eq!(p, Page { objects: 5, min_size: 8000, max_size: 8000 });
        assert_eq!(p.total_bytes(), 40000);
        let r = Page::parse("50", "400-8KB").unwrap();
        assert_eq!((r.min_size, r.max_size), (400, 8000));
        let sizes: std::collections::BTreeSet<u64> = (0..50).map(|i| r.object_size(i)).collect();
        assert!(sizes.iter().all(|s| (400..=8000).contains(s)));
        assert!(sizes.len() >= 10);
        // splitmix64 as Go computes it (values from content.Page.ObjectSize).
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(1), 0x910A_2DEC_8902_5CC1);
        for (n, s) in [("-1", "1KB"), ("x", "1KB"), ("10001", "1KB"), ("5", "big"), ("5", "8KB-400"), ("5", "1-x")] {
            assert!(Page::parse(n, s).is_err(), "{n} {s}");
        }
        assert_eq!(Page::parse("x", "1KB").unwrap_err(), "page object count \"x\": want an integer from 0 to 10000");
        assert_eq!(
            Page::parse("5", "8KB-400").unwrap_err(),
            "page object size range \"8KB-400\": lower bound above upper bound"
        );

        let h = String::from_utf8(Page { objects: 2, min_size: 100, max_size: 100 }.html("/page/2/100")).unwrap();
        assert_eq!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
             <link rel=\"icon\" href=\"data:,\">\n\
             <title>quicbench page: 2 objects</title></head>\n<body>\n<h1>quicbench page: 2 objects</h1>\n\
             <img src=\"/page/2/100/0.png\" width=\"1\" height=\"1\" alt=\"\">\n\
             <img src=\"/page/2/100/1.png\" width=\"1\" height=\"1\" alt=\"\">\n\
             </body></html>\n"
        );
        assert_eq!(object_path("/page/3/100/", 2), "/page/3/100/2.png");
        assert_eq!(object_path("/page/3/100//", 2), "/page/3/100//2.png");
        assert_eq!(html_escape("<a href=\"x\">&'"), "&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
    }

    #[test]
    fn png_frame() {
        let f = PngFrame::default();
        assert_eq!(f.min_size(), 83, "content.MinPNGSize");
        assert_eq!(f.object_type(83), "image/png");
        assert_eq!(f.object_type(82), "application/octet-stream");
        assert!(PngFrame::from_hex("zz", PNG_TAIL_HEX).is_err());
        assert!(PngFrame::from_hex("00", PNG_TAIL_HEX).is_err());
    }
}

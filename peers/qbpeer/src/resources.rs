//! quicbench's resources, as its own server serves them
//! (`endpoint/handlers.go`), as response plans.
//!
//! The stack's HTTP/3 layer reads a request's headers into a
//! [`RequestHead`], reads (or drains) the request body into an [`Upload`]
//! (keeping the bytes only when [`Resources::wants_body`] says so: `/echo`),
//! then asks [`Resources::respond`] for a [`Response`]: the status, the
//! header fields and a [`Body`] it writes with its own backpressure.
//!
//! | resource | answer |
//! |---|---|
//! | `/` | a short index (text) |
//! | `/bytes/N` | N pattern bytes (N as `content.ParseSize` reads it) |
//! | `/upload` | POST/PUT: `{"bytes":N,"nanos":D}` (body bytes, first to last byte); else 405 |
//! | `/echo` | GET: `ok\n`; POST/PUT: the body back (at most 16 MiB, else 413) |
//! | `/stream?segments=K&interval=D&size=S` | K segments of S pattern bytes, segment i due at start + i*D |
//! | `/page/N/S` | the page's HTML |
//! | `/page/N/S/I.png` | object I: a valid PNG of its exact size (pattern bytes below 83 bytes) |
//! | `/site/NAME/...` | a file under the site's directory; 301 for a directory without a slash, its index.html with one |
//!
//! Anything else is a 404 ("404 page not found"); malformed parameters are
//! a 400 whose text is the Go server's. HEAD gets the headers without the
//! body. Every response carries `cache-control: no-store`.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::body::Body;
use crate::content::{atoi, parse_duration, parse_size, GoQuote, Page, PngFrame};

/// The largest body `/echo` sends back.
pub const MAX_ECHO: usize = 16 << 20;
/// `/stream` limits, as the Go server's.
pub const MAX_STREAM_SEGMENTS: i64 = 100_000;
pub const MAX_STREAM_INTERVAL: Duration = Duration::from_secs(60);
pub const MAX_SEGMENT_SIZE: u64 = 64 << 20;

/// A request's method and `:path` (path and query, percent-encoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub path: String,
}

impl RequestHead {
    pub fn new(method: impl Into<String>, path: impl Into<String>) -> RequestHead {
        RequestHead { method: method.into(), path: path.into() }
    }

    /// The decoded path (what Go's `r.URL.Path` holds) and the raw query.
    pub fn split(&self) -> (String, &str) {
        let (raw, query) = self.path.split_once('?').unwrap_or((&self.path, ""));
        let path = percent_encoding::percent_decode_str(raw).decode_utf8_lossy().into_owned();
        (path, query)
    }

    fn is_upload(&self) -> bool {
        self.method == "POST" || self.method == "PUT"
    }
}

/// What the request body brought: its length, the times of its first byte
/// and of its end, and its bytes when kept (`/echo`).
#[derive(Debug, Default)]
pub struct Upload {
    pub bytes: u64,
    pub first: Option<Instant>,
    pub end: Option<Instant>,
    keep: bool,
    body: Vec<u8>,
}

impl Upload {
    /// A body reader that keeps the bytes (at most 16 MiB + 1) when `keep`.
    pub fn new(keep: bool) -> Upload {
        Upload { keep, ..Upload::default() }
    }

    /// Records body bytes that arrived at `now`.
    pub fn data(&mut self, data: &[u8], now: Instant) {
        if data.is_empty() {
            return;
        }
        if self.bytes == 0 {
            self.first = Some(now);
        }
        self.bytes += data.len() as u64;
        self.end = Some(now);
        if self.keep && self.body.len() <= MAX_ECHO {
            let room = MAX_ECHO + 1 - self.body.len();
            self.body.extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    /// Records the end of the body at `now` (the Go server's upload time
    /// runs from the first byte read to the end of the body).
    pub fn finish(&mut self, now: Instant) {
        if self.bytes > 0 {
            self.end = Some(now);
        }
    }

    /// Nanoseconds from the first body byte to the end of the body.
    pub fn nanos(&self) -> u64 {
        match (self.first, self.end) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_nanos() as u64,
            _ => 0,
        }
    }
}

/// A response plan: status, header fields (lower-case names; the stack
/// adds `:status`) and the body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

impl Response {
    /// A response whose Content-Length is the body's known length.
    fn sized(status: u16, ctype: &str, body: Body) -> Response {
        let mut headers = vec![("cache-control", "no-store".to_string()), ("content-type", ctype.to_string())];
        if let Some(n) = body.len() {
            headers.push(("content-length", n.to_string()));
        }
        Response { status, headers, body }
    }

    /// Go's `http.Error(w, msg, status)`.
    pub fn error(status: u16, msg: &str) -> Response {
        let mut r = Response::sized(status, "text/plain; charset=utf-8", Body::bytes(format!("{msg}\n")));
        r.headers.push(("x-content-type-options", "nosniff".into()));
        r
    }

    fn not_found() -> Response {
        Response::error(404, "404 page not found")
    }

    /// The value of header `name`, if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// Go's `validSiteName`: letters, digits, '-', '_' and '.', not "." or "..".
pub fn valid_site_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.');
    if ok {
        Ok(())
    } else {
        Err(format!("site {}: site names may use letters, digits, '-', '_' and '.' only", GoQuote(name)))
    }
}

/// The Content-Type of a site file by its extension: Go's built-in table
/// (`mime.TypeByExtension`), then mime_guess's, else octet-stream; text
/// types carry `charset=utf-8`.
pub fn content_type(path: &Path) -> String {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let go = match ext.as_str() {
        "avif" => Some("image/avif"),
        "css" => Some("text/css; charset=utf-8"),
        "gif" => Some("image/gif"),
        "htm" | "html" => Some("text/html; charset=utf-8"),
        "jpeg" | "jpg" => Some("image/jpeg"),
        "js" | "mjs" => Some("text/javascript; charset=utf-8"),
        "json" => Some("application/json"),
        "pdf" => Some("application/pdf"),
        "png" => Some("image/png"),
        "svg" => Some("image/svg+xml"),
        "wasm" => Some("application/wasm"),
        "webp" => Some("image/webp"),
        "xml" => Some("text/xml; charset=utf-8"),
        _ => None,
    };
    if let Some(t) = go {
        return t.to_string();
    }
    match mime_guess::from_ext(&ext).first() {
        Some(m) if m.type_() == mime_guess::mime::TEXT => format!("{m}; charset=utf-8"),
        Some(m) => m.to_string(),
        None => "application/octet-stream".into(),
    }
}

/// quicbench's resources for one server: its sites and PNG frame.
#[derive(Debug, Clone)]
pub struct Resources {
    sites: BTreeMap<String, PathBuf>,
    png: PngFrame,
    index: String,
}

impl Resources {
    /// Resources serving `sites` (NAME -> directory; each must exist) with
    /// the PNG frame `png`; `stack` names the peer in the index text.
    pub fn new(sites: &BTreeMap<String, PathBuf>, png: PngFrame, stack: &str) -> Result<Resources, String> {
        let mut canon = BTreeMap::new();
        for (name, dir) in sites {
            valid_site_name(name)?;
            let c = std::fs::canonicalize(dir).map_err(|e| format!("site {name}: {}: {e}", dir.display()))?;
            if !c.is_dir() {
                return Err(format!("site {name}: {} is not a directory", dir.display()));
            }
            canon.insert(name.clone(), c);
        }
        let index = format!(
            "quicbench server ({stack} peer). Resources:\n  /bytes/N   /upload   /echo   /stream?segments=K&interval=D&size=S\n  /page/N/S  /page/N/S/I.png   /site/NAME/...\n"
        );
        Ok(Resources { sites: canon, png, index })
    }

    /// Whether the request body must be kept for the answer (`/echo`);
    /// every other body is only counted.
    pub fn wants_body(&self, head: &RequestHead) -> bool {
        head.is_upload() && head.split().0 == "/echo"
    }

    /// The response to a request whose body has been read into `upload`.
    pub fn respond(&self, head: &RequestHead, upload: &Upload) -> Response {
        let mut r = self.route(head, upload);
        if head.method == "HEAD" {
            r.body = Body::empty();
        }
        r
    }

    fn route(&self, head: &RequestHead, upload: &Upload) -> Response {
        let (path, query) = head.split();
        match path.as_str() {
            "/" => return Response::sized(200, "text/plain; charset=utf-8", Body::bytes(self.index.clone())),
            "/upload" => {
                if !head.is_upload() {
                    let mut r = Response::error(405, "/upload takes a POST or PUT body");
                    r.headers.push(("allow", "POST, PUT".into()));
                    return r;
                }
                let body = format!("{{\"bytes\":{},\"nanos\":{}}}\n", upload.bytes, upload.nanos());
                return Response::sized(200, "application/json", Body::bytes(body));
            }
            "/echo" => {
                if !head.is_upload() {
                    return Response::sized(200, "application/octet-stream", Body::bytes(&b"ok\n"[..]));
                }
                if upload.bytes > MAX_ECHO as u64 {
                    return Response::error(413, "/echo takes at most 16 MiB");
                }
                return Response::sized(200, "application/octet-stream", Body::bytes(upload.body.clone()));
            }
            "/stream" => return stream(query),
            _ => {}
        }
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() == 3 && parts[1] == "bytes" {
            return match parse_size(parts[2]) {
                Ok(n) => Response::sized(200, "application/octet-stream", Body::pattern(n)),
                Err(e) => Response::error(400, &format!("/bytes/N: {e}")),
            };
        }
        if (parts.len() == 4 || parts.len() == 5) && parts[1] == "page" {
            return self.page(&path, &parts);
        }
        if parts.len() >= 3 && parts[1] == "site" {
            if let Some(root) = self.sites.get(parts[2]) {
                return site(root, &path, &parts);
            }
        }
        Response::not_found()
    }

    fn page(&self, path: &str, parts: &[&str]) -> Response {
        let what = if parts.len() == 4 { "/page/N/S" } else { "/page/N/S/I.png" };
        let p = match Page::parse(parts[2], parts[3]) {
            Ok(p) => p,
            Err(e) => return Response::error(400, &format!("{what}: {e}")),
        };
        if parts.len() == 4 {
            return Response::sized(200, "text/html; charset=utf-8", Body::bytes(p.html(path)));
        }
        let obj = parts[4];
        let i = obj.strip_suffix(".png").and_then(atoi);
        match i {
            Some(i) if i >= 0 && (i as u64) < p.objects as u64 => {
                let size = p.object_size(i as usize);
                Response::sized(200, self.png.object_type(size), Body::page_object(size, &self.png))
            }
            _ => Response::error(
                404,
                &format!("/page/N/S/I.png: object {}: want I.png with 0 <= I < {}", GoQuote(obj), p.objects),
            ),
        }
    }
}

/// `/stream`'s query: segments (default 20), interval (50ms), size (1000).
pub fn stream_params(query: &str) -> Result<(u64, Duration, u64), String> {
    let get =
        |k: &str| form_urlencoded::parse(query.as_bytes()).find(|(name, _)| name == k).map(|(_, v)| v.into_owned());
    let (mut segments, mut interval, mut size) = (20u64, Duration::from_millis(50), 1000u64);
    if let Some(v) = get("segments").filter(|v| !v.is_empty()) {
        match atoi(&v) {
            Some(n) if (1..=MAX_STREAM_SEGMENTS).contains(&n) => segments = n as u64,
            _ => return Err(format!("segments={}: want an integer from 1 to {MAX_STREAM_SEGMENTS}", GoQuote(&v))),
        }
    }
    if let Some(v) = get("interval").filter(|v| !v.is_empty()) {
        match parse_duration(&v) {
            Ok(ns) if ns >= 0 && ns as u128 <= MAX_STREAM_INTERVAL.as_nanos() => {
                interval = Duration::from_nanos(ns as u64)
            }
            _ => return Err(format!("interval={}: want a duration from 0 to 1m, e.g. 50ms", GoQuote(&v))),
        }
    }
    if let Some(v) = get("size").filter(|v| !v.is_empty()) {
        match parse_size(&v) {
            Ok(n) if (1..=MAX_SEGMENT_SIZE).contains(&n) => size = n,
            _ => return Err(format!("size={}: want a size from 1 B to 64 MiB", GoQuote(&v))),
        }
    }
    Ok((segments, interval, size))
}

fn stream(query: &str) -> Response {
    match stream_params(query) {
        Ok((segments, interval, size)) => Response {
            status: 200,
            headers: vec![
                ("cache-control", "no-store".into()),
                ("content-type", "application/octet-stream".into()),
                ("x-content-type-options", "nosniff".into()),
            ],
            body: Body::stream(segments, interval, size),
        },
        Err(e) => Response::error(400, &format!("/stream: {e}")),
    }
}

/// A 301 to `location` (relative, as Go's `localRedirect` writes it).
fn redirect(location: String) -> Response {
    Response {
        status: 301,
        headers: vec![("cache-control", "no-store".into()), ("location", location), ("content-length", "0".into())],
        body: Body::empty(),
    }
}

/// A file under a site's directory, as Go's `http.FileServer` serves it:
/// a path ending in /index.html redirects to "./", a directory without a
/// trailing slash to "NAME/", a file with one to "../NAME"; a directory
/// serves its index.html (a directory without one is a 404 here, where Go
/// lists it). Like Go's `os.Root`, no path leaves the directory: `..`
/// segments are refused and symbolic links are resolved before the check.
fn site(root: &Path, path: &str, parts: &[&str]) -> Response {
    if path.ends_with("/index.html") {
        return redirect("./".into());
    }
    let rel = &parts[3..];
    if rel.contains(&"..") {
        return Response::not_found();
    }
    let inside = |p: &Path| -> Option<PathBuf> {
        let c = std::fs::canonicalize(p).ok()?;
        c.starts_with(root).then_some(c)
    };
    let rel: Vec<&str> = rel.iter().copied().filter(|s| !s.is_empty()).collect();
    let Some(mut target) = inside(&root.join(rel.join("/"))) else {
        return Response::not_found();
    };
    let base = parts.iter().rev().find(|s| !s.is_empty()).copied().unwrap_or("");
    if target.is_dir() {
        if !path.ends_with('/') {
            return redirect(format!("{base}/"));
        }
        match inside(&target.join("index.html")) {
            Some(t) => target = t,
            None => return Response::not_found(),
        }
    } else if path.ends_with('/') {
        return redirect(format!("../{base}"));
    }
    let Ok(file) = File::open(&target) else {
        return Response::not_found();
    };
    match file.metadata() {
        Ok(m) if m.is_file() => Response::sized(200, &content_type(&target), Body::file(file, m.len())),
        _ => Response::not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::Next;
    use crate::content::check_pattern;

    fn body_of(mut r: Response) -> Vec<u8> {
        let now = Instant::now();
        let mut out = Vec::new();
        while let Next::Data(d) = r.body.next(now, 1 << 20).unwrap() {
            out.extend_from_slice(&d);
        }
        out
    }

    fn get(res: &Resources, path: &str) -> Response {
        res.respond(&RequestHead::new("GET", path), &Upload::new(false))
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("qbpeer-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn bytes_and_errors() {
        let res = Resources::new(&BTreeMap::new(), PngFrame::default(), "test").unwrap();
        let r = get(&res, "/bytes/100KB");
        assert_eq!((r.status, r.header("content-length")), (200, Some("100000")));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        let b = body_of(r);
        assert_eq!(b.len(), 100_000);
        assert!(check_pattern(0, &b).is_ok());

        let r = get(&res, "/bytes/2TiB");
        assert_eq!(r.status, 400);
        assert_eq!(body_of(r), b"/bytes/N: size \"2TiB\" exceeds the maximum of 1 TiB\n");
        let r = get(&res, "/nothing");
        assert_eq!(r.status, 404);
        assert_eq!(body_of(r), b"404 page not found\n");
        let r = get(&res, "/upload");
        assert_eq!((r.status, r.header("allow")), (405, Some("POST, PUT")));
        assert_eq!(body_of(r), b"/upload takes a POST or PUT body\n");

        let head = res.respond(&RequestHead::new("HEAD", "/bytes/10"), &Upload::new(false));
        assert_eq!(head.header("content-length"), Some("10"));
        assert!(head.body.is_empty());
        assert_eq!(body_of(get(&res, "/echo")), b"ok\n");
    }

    #[test]
    fn upload_and_echo() {
        let res = Resources::new(&BTreeMap::new(), PngFrame::default(), "test").unwrap();
        let h = RequestHead::new("POST", "/upload");
        assert!(!res.wants_body(&h));
        let t0 = Instant::now();
        let mut up = Upload::new(res.wants_body(&h));
        up.data(b"abc", t0);
        up.data(b"de", t0 + Duration::from_millis(3));
        up.finish(t0 + Duration::from_millis(5));
        let r = res.respond(&h, &up);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(body_of(r), b"{\"bytes\":5,\"nanos\":5000000}\n");

        let e = RequestHead::new("PUT", "/echo");
        assert!(res.wants_body(&e));
        let mut up = Upload::new(true);
        up.data(b"hello", t0);
        up.finish(t0);
        assert_eq!(body_of(res.respond(&e, &up)), b"hello");
        let mut big = Upload::new(true);
        big.data(&vec![0u8; MAX_ECHO + 10], t0);
        assert_eq!(res.respond(&e, &big).status, 413);
    }

    #[test]
    fn stream_params_and_errors() {
        assert_eq!(stream_params(""), Ok((20, Duration::from_millis(50), 1000)));
        assert_eq!(stream_params("segments=3&interval=1s&size=1KB"), Ok((3, Duration::from_secs(1), 1000)));
        // A "+" in a query is a space (Go's url.ParseQuery): "%2B3" is "+3".
        assert_eq!(stream_params("segments=%2B3&interval=0"), Ok((3, Duration::ZERO, 1000)));
        assert!(stream_params("segments=+3").is_err());
        assert_eq!(stream_params("segments=0").unwrap_err(), "segments=\"0\": want an integer from 1 to 100000");
        assert_eq!(
            stream_params("interval=2m").unwrap_err(),
            "interval=\"2m\": want a duration from 0 to 1m, e.g. 50ms"
        );
        assert!(stream_params("interval=-1s").is_err());
        assert_eq!(stream_params("size=65MiB").unwrap_err(), "size=\"65MiB\": want a size from 1 B to 64 MiB");
        let res = Resources::new(&BTreeMap::new(), PngFrame::default(), "test").unwrap();
        let r = get(&res, "/stream?segments=2&interval=0&size=10");
        assert_eq!(r.header("content-length"), None);
        assert_eq!(body_of(r).len(), 20);
        assert_eq!(get(&res, "/stream?segments=x").status, 400);
    }

    #[test]
    fn pages_and_objects() {
        let res = Resources::new(&BTreeMap::new(), PngFrame::default(), "test").unwrap();
        let r = get(&res, "/page/3/100");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        assert_eq!(body_of(r), Page { objects: 3, min_size: 100, max_size: 100 }.html("/page/3/100"));
        let r = get(&res, "/page/3/100/2.png");
        assert_eq!((r.status, r.header("content-type")), (200, Some("image/png")));
        assert_eq!(body_of(r).len(), 100);
        let r = get(&res, "/page/3/50/0.png");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        let r = get(&res, "/page/3/100/3.png");
        assert_eq!(r.status, 404);
        assert_eq!(body_of(r), b"/page/N/S/I.png: object \"3.png\": want I.png with 0 <= I < 3\n");
        let r = get(&res, "/page/x/100");
        assert_eq!(body_of(r), b"/page/N/S: page object count \"x\": want an integer from 0 to 10000\n");
        let p = Page::parse("20", "1KB-10KB").unwrap();
        for i in 0..20 {
            let r = get(&res, &format!("/page/20/1KB-10KB/{i}.png"));
            assert_eq!(body_of(r).len() as u64, p.object_size(i));
        }
    }

    #[test]
    fn sites_refuse_paths_that_leave_them() {
        let d = tmpdir("site");
        let site = d.join("www");
        std::fs::create_dir_all(site.join("sub")).unwrap();
        std::fs::write(site.join("a.css"), b"body{}").unwrap();
        std::fs::write(site.join("sub/index.html"), b"<p>sub</p>").unwrap();
        std::fs::write(d.join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), site.join("link")).unwrap();
        std::fs::create_dir_all(site.join("empty")).unwrap();
        let sites = BTreeMap::from([("w".to_string(), site.clone())]);
        let res = Resources::new(&sites, PngFrame::default(), "test").unwrap();

        let r = get(&res, "/site/w/a.css");
        assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
        assert_eq!(body_of(r), b"body{}");
        assert_eq!(body_of(get(&res, "/site/w/sub/")), b"<p>sub</p>");
        let r = get(&res, "/site/w/sub");
        assert_eq!((r.status, r.header("location")), (301, Some("sub/")));
        let r = get(&res, "/site/w");
        assert_eq!((r.status, r.header("location")), (301, Some("w/")));
        let r = get(&res, "/site/w/sub/index.html");
        assert_eq!((r.status, r.header("location")), (301, Some("./")));
        let r = get(&res, "/site/w/a.css/");
        assert_eq!((r.status, r.header("location")), (301, Some("../a.css")));
        for bad in [
            "/site/w/../secret",
            "/site/w/%2e%2e/secret",
            "/site/w/sub/../../secret",
            "/site/w/link",
            "/site/w/empty/",
            "/site/w/missing",
            "/site/x/a.css",
        ] {
            assert_eq!(get(&res, bad).status, 404, "{bad}");
        }
        assert!(Resources::new(&BTreeMap::from([("a/b".to_string(), site.clone())]), PngFrame::default(), "t").is_err());
        assert!(Resources::new(&BTreeMap::from([("a".to_string(), d.join("nope"))]), PngFrame::default(), "t").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}

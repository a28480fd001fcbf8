//! The server's configuration file and the client's request: the input side
//! of the peer program protocol (the same JSON quicbench's Go side writes
//! for the aioquic peer: `endpoint/peer.go` aioquicConfig and
//! `peers/aioquic/client.go` request).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::content::PngFrame;
use crate::resources::Resources;

/// quic-go's largest connection flow-control window (`h3.ConnWindow`).
pub const DEFAULT_MAX_DATA: u64 = 15 << 20;
/// quic-go's largest stream flow-control window (`h3.StreamWindow`).
pub const DEFAULT_MAX_STREAM_DATA: u64 = 6 << 20;
/// The largest UDP payload on a 1500-byte MTU path over IPv4
/// (1500 - 20 - 8 - 20 of slack, what quic-go reaches by MTU discovery).
pub const DEFAULT_MAX_DATAGRAM_SIZE: u16 = 1452;
/// The smallest UDP payload QUIC allows.
pub const MIN_DATAGRAM_SIZE: u16 = 1200;

/// The server's configuration (`--config FILE`), what the Go wrapper
/// writes. Zero or empty values take the defaults noted.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerConfig {
    /// Address to listen on ("0.0.0.0", "::" or one address).
    pub host: String,
    /// UDP port; 0 picks a free one (reported in `ready.port`).
    #[serde(default)]
    pub port: u16,
    /// PEM certificate chain and private key (PKCS#8, SEC1 or PKCS#1).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Congestion control: a name of the stack's list ("" = the stack's
    /// default, stated in its README).
    #[serde(default)]
    pub cc: String,
    /// Largest UDP payload (0 = 1452).
    #[serde(default)]
    pub max_datagram_size: u64,
    /// Flow-control windows (0 = quic-go's: 15 MiB and 6 MiB).
    #[serde(default)]
    pub max_data: u64,
    #[serde(default)]
    pub max_stream_data: u64,
    /// UDP send and receive buffer to ask for (0 = the kernel's default).
    #[serde(default)]
    pub socket_buffer: u64,
    /// Directory for one qlog file per connection ("" = none).
    #[serde(default)]
    pub qlog_dir: String,
    /// File the TLS secrets are appended to, NSS key log format ("" = none).
    #[serde(default)]
    pub keylog: String,
    /// NAME -> directory, served as /site/NAME/.
    #[serde(default)]
    pub sites: Option<BTreeMap<String, PathBuf>>,
    /// The PNG frame (hex) of quicbench's page objects ("" = the built-in
    /// copy, [`crate::content::PNG_HEAD_HEX`]).
    #[serde(default)]
    pub png_head: String,
    #[serde(default)]
    pub png_tail: String,
}

impl ServerConfig {
    /// Reads and validates the configuration file at `path`. Errors name
    /// the file and the field.
    pub fn load(path: &Path) -> Result<ServerConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("config {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }

    /// Parses and validates a configuration.
    pub fn parse(text: &str) -> Result<ServerConfig, String> {
        let c: ServerConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<(), String> {
        self.host.parse::<IpAddr>().map_err(|_| format!("host {:?}: not an IP address", self.host))?;
        for (what, p) in [("cert", &self.cert), ("key", &self.key)] {
            if p.as_os_str().is_empty() {
                return Err(format!("{what}: no file given"));
            }
            std::fs::metadata(p).map_err(|e| format!("{what} {}: {e}", p.display()))?;
        }
        check_datagram_size(self.max_datagram_size)?;
        check_window("max_data", self.max_data)?;
        check_window("max_stream_data", self.max_stream_data)?;
        if self.socket_buffer > i32::MAX as u64 {
            return Err(format!("socket_buffer {}: at most {} bytes", self.socket_buffer, i32::MAX));
        }
        self.png_frame()?;
        self.resources("check")?;
        Ok(())
    }

    /// The largest UDP payload to use.
    pub fn datagram_size(&self) -> u16 {
        if self.max_datagram_size == 0 {
            DEFAULT_MAX_DATAGRAM_SIZE
        } else {
            self.max_datagram_size as u16
        }
    }

    /// The connection and stream flow-control windows to use.
    pub fn windows(&self) -> (u64, u64) {
        (nonzero(self.max_data, DEFAULT_MAX_DATA), nonzero(self.max_stream_data, DEFAULT_MAX_STREAM_DATA))
    }

    /// The PNG frame of page objects.
    pub fn png_frame(&self) -> Result<PngFrame, String> {
        match (self.png_head.is_empty(), self.png_tail.is_empty()) {
            (true, true) => Ok(PngFrame::default()),
            (false, false) => PngFrame::from_hex(&self.png_head, &self.png_tail),
            _ => Err("png_head and png_tail: give both or neither".into()),
        }
    }

    /// The resources this server serves; `stack` names it in the index.
    pub fn resources(&self, stack: &str) -> Result<Resources, String> {
        Resources::new(&self.sites.clone().unwrap_or_default(), self.png_frame()?, stack)
    }
}

fn nonzero(v: u64, def: u64) -> u64 {
    if v == 0 {
        def
    } else {
        v
    }
}

fn check_datagram_size(v: u64) -> Result<(), String> {
    if v != 0 && !(u64::from(MIN_DATAGRAM_SIZE)..=65527).contains(&v) {
        return Err(format!("max_datagram_size {v}: want {MIN_DATAGRAM_SIZE} to 65527 bytes (0 = 1452)"));
    }
    Ok(())
}

fn check_window(what: &str, v: u64) -> Result<(), String> {
    // QUIC's variable-length integers end at 2^62; 1 GiB is plenty.
    if v > 1 << 30 {
        return Err(format!("{what} {v}: at most 1 GiB"));
    }
    Ok(())
}

/// Refuses a congestion control the stack cannot run: `allowed` lists its
/// names; "" takes `default`. Returns the name to run.
pub fn check_cc(field: &str, cc: &str, allowed: &[&str], default: &str) -> Result<String, String> {
    if cc.is_empty() {
        return Ok(default.to_string());
    }
    if allowed.contains(&cc) {
        Ok(cc.to_string())
    } else {
        Err(format!("{field} {cc:?}: this stack runs {} only", allowed.join(", ")))
    }
}

fn default_repeat() -> u32 {
    1
}
fn default_handshake_timeout() -> f64 {
    10.0
}
fn default_first_byte_timeout() -> f64 {
    15.0
}
fn default_idle_timeout() -> f64 {
    10.0
}
fn default_timeout() -> f64 {
    600.0
}

/// The client's request (one JSON object on stdin), client.py's fields.
/// Times are in seconds.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientRequest {
    /// The server's address (an IP address or a name) and UDP port.
    pub host: String,
    pub port: u16,
    /// The TLS server name ("" = host).
    #[serde(default)]
    pub server_name: String,
    /// PEM of the CA that signs the server's certificate ("" = the
    /// system's roots, where the stack has them).
    #[serde(default)]
    pub ca_pem: String,
    /// The requests: `paths` in order, `repeat` times, at most `parallel`
    /// streams in flight.
    pub paths: Vec<String>,
    #[serde(default = "default_repeat")]
    pub repeat: u32,
    #[serde(default = "default_repeat")]
    pub parallel: u32,
    /// POST this many bytes (the pattern) with each request (0 = GET).
    #[serde(default)]
    pub upload: u64,
    /// Complete one unmeasured GET /echo first.
    #[serde(default)]
    pub warm: bool,
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout: f64,
    #[serde(default = "default_first_byte_timeout")]
    pub first_byte_timeout: f64,
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout: f64,
    #[serde(default = "default_timeout")]
    pub timeout: f64,
    /// A name of the stack's list ("" = its default).
    #[serde(default)]
    pub congestion_control: String,
    /// 0 = 1452, 15 MiB, 6 MiB.
    #[serde(default)]
    pub max_datagram_size: u64,
    #[serde(default)]
    pub max_data: u64,
    #[serde(default)]
    pub max_stream_data: u64,
    /// SO_RCVBUF to ask for (0 = the kernel's default).
    #[serde(default)]
    pub rcvbuf: u64,
    /// One qlog per connection into this directory ("" = none).
    #[serde(default)]
    pub qlog_dir: String,
    /// Append the TLS secrets to this file, NSS key log format ("" = none).
    #[serde(default)]
    pub keylog: String,
}

impl ClientRequest {
    /// Parses and validates a request; the error says what is wrong.
    pub fn parse(text: &str) -> Result<ClientRequest, String> {
        let r: ClientRequest = serde_json::from_str(text).map_err(|e| format!("reading the request: {e}"))?;
        r.validate()?;
        Ok(r)
    }

    fn validate(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Err("request field \"host\" is empty".into());
        }
        if self.port == 0 {
            return Err("request field \"port\" is 0".into());
        }
        if self.paths.is_empty() || !self.paths.iter().all(|p| p.starts_with('/')) {
            return Err("paths must be a non-empty list of paths starting with /".into());
        }
        for (what, v) in [
            ("handshake_timeout", self.handshake_timeout),
            ("first_byte_timeout", self.first_byte_timeout),
            ("idle_timeout", self.idle_timeout),
            ("timeout", self.timeout),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1e6) {
                return Err(format!("{what} {v}: want a positive number of seconds"));
            }
        }
        check_datagram_size(self.max_datagram_size)?;
        check_window("max_data", self.max_data)?;
        check_window("max_stream_data", self.max_stream_data)?;
        if self.rcvbuf > i32::MAX as u64 {
            return Err(format!("rcvbuf {}: at most {} bytes", self.rcvbuf, i32::MAX));
        }
        Ok(())
    }

    /// The largest UDP payload to use.
    pub fn datagram_size(&self) -> u16 {
        if self.max_datagram_size == 0 {
            DEFAULT_MAX_DATAGRAM_SIZE
        } else {
            self.max_datagram_size as u16
        }
    }

    /// The connection and stream flow-control windows to use.
    pub fn windows(&self) -> (u64, u64) {
        (nonzero(self.max_data, DEFAULT_MAX_DATA), nonzero(self.max_stream_data, DEFAULT_MAX_STREAM_DATA))
    }

    /// The TLS server name.
    pub fn sni(&self) -> &str {
        if self.server_name.is_empty() {
            &self.host
        } else {
            &self.server_name
        }
    }

    /// The `:authority` of the requests (client.py's: the server name and
    /// port, an IPv6 host in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.sni(), self.port)
        }
    }

    /// The measured requests in order: `paths` repeated `repeat` times.
    pub fn plan(&self) -> Vec<String> {
        let mut v = Vec::with_capacity(self.paths.len() * self.repeat.max(1) as usize);
        for _ in 0..self.repeat.max(1) {
            v.extend(self.paths.iter().cloned());
        }
        v
    }

    /// How many requests may be in flight at once.
    pub fn parallelism(&self) -> usize {
        (self.parallel.max(1) as usize).min(self.paths.len() * self.repeat.max(1) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (PathBuf, PathBuf) {
        let d = std::env::temp_dir().join(format!("qbpeer-config-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (c, k) = (d.join("cert.pem"), d.join("key.pem"));
        std::fs::write(&c, "x").unwrap();
        std::fs::write(&k, "x").unwrap();
        (c, k)
    }

    #[test]
    fn server_config_validation() {
        let (c, k) = files();
        let ok = format!(
            r#"{{"host":"127.0.0.1","port":0,"cert":{c:?},"key":{k:?},"cc":"cubic","max_datagram_size":1452,
            "max_data":15728640,"max_stream_data":6291456,"socket_buffer":7340032,"qlog_dir":"","keylog":"",
            "sites":null,"png_head":"","png_tail":""}}"#
        );
        let cfg = ServerConfig::parse(&ok).unwrap();
        assert_eq!(cfg.datagram_size(), 1452);
        assert_eq!(cfg.windows(), (15 << 20, 6 << 20));
        let bad = |patch: serde_json::Value, want: &str| {
            let mut v: serde_json::Value = serde_json::from_str(&ok).unwrap();
            for (k, x) in patch.as_object().unwrap() {
                v[k] = x.clone();
            }
            let err = ServerConfig::parse(&v.to_string()).unwrap_err();
            assert!(err.contains(want), "{patch}: {err}");
        };
        use serde_json::json;
        bad(json!({"host": "nowhere"}), "not an IP address");
        bad(json!({"port": 70000}), "expected u16");
        bad(json!({"max_datagram_size": 100}), "max_datagram_size 100");
        bad(json!({"max_data": 99999999999u64}), "max_data");
        bad(json!({"png_head": "zz", "png_tail": "00"}), "png_head");
        bad(json!({"png_head": "89"}), "give both");
        bad(json!({"sites": {"x": "/no/such/dir"}}), "site x");
        bad(json!({"sites": {"../x": "/tmp"}}), "site names");
        bad(json!({"key": "/no/such/key"}), "key /no/such/key");
        bad(json!({"cert": ""}), "cert: no file given");
        assert!(ServerConfig::parse("{").is_err());
        assert!(ServerConfig::load(Path::new("/no/such/config.json")).unwrap_err().contains("/no/such/config.json"));
    }

    #[test]
    fn check_cc_refuses_unknown() {
        assert_eq!(check_cc("cc", "", &["reno", "cubic"], "cubic").unwrap(), "cubic");
        assert_eq!(check_cc("cc", "reno", &["reno", "cubic"], "cubic").unwrap(), "reno");
        let e = check_cc("cc", "vegas", &["reno", "cubic"], "cubic").unwrap_err();
        assert_eq!(e, "cc \"vegas\": this stack runs reno, cubic only");
    }

    #[test]
    fn client_request_validation() {
        let r = ClientRequest::parse(
            r#"{"host":"10.0.0.2","port":443,"paths":["/bytes/1MB","/echo"],"repeat":2,"parallel":8}"#,
        )
        .unwrap();
        assert_eq!(r.plan(), ["/bytes/1MB", "/echo", "/bytes/1MB", "/echo"]);
        assert_eq!(r.parallelism(), 4);
        assert_eq!((r.handshake_timeout, r.first_byte_timeout, r.idle_timeout, r.timeout), (10.0, 15.0, 10.0, 600.0));
        assert_eq!(r.authority(), "10.0.0.2:443");
        assert_eq!(r.datagram_size(), 1452);
        let r6 = ClientRequest::parse(r#"{"host":"::1","port":443,"paths":["/"],"server_name":"x"}"#).unwrap();
        assert_eq!((r6.authority().as_str(), r6.sni()), ("[::1]:443", "x"));
        for (text, want) in [
            (r#"{"port":443,"paths":["/"]}"#, "missing field `host`"),
            (r#"{"host":"h","port":"x","paths":["/"]}"#, "invalid type"),
            (r#"{"host":"h","port":443,"paths":[]}"#, "paths must be"),
            (r#"{"host":"h","port":443,"paths":["x"]}"#, "paths must be"),
            (r#"{"host":"h","port":443,"paths":["/"],"repeat":-1}"#, "invalid value"),
            (r#"{"host":"h","port":443,"paths":["/"],"timeout":0}"#, "timeout 0"),
            (r#"{"host":"h","port":443,"paths":["/"],"max_datagram_size":9}"#, "max_datagram_size 9"),
            (r#"{"host":"","port":443,"paths":["/"]}"#, "\"host\" is empty"),
            ("[1]", "invalid type"),
        ] {
            let e = ClientRequest::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}

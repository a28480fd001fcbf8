//! The programs' command lines.
//!
//! ```text
//! qb-quiche-server --config FILE   serve (quicbench's Go side writes FILE)
//! qb-quiche-server --version       print "quiche 0.x.y"
//! qb-quiche-server --check         self-check, one JSON object
//! qb-quiche-client [FILE]          one JSON request on stdin (or in FILE)
//! qb-quiche-client --bodies DIR [FILE]
//!                                  also write each measured response body
//!                                  to DIR/<request index> (for tests)
//! qb-quiche-client --version | --check
//! ```

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use qbpeer::config::{check_cc, ServerConfig};

use crate::transport::{self, congestion_control, Settings, CC_NAMES};

/// The congestion control when the configuration names none (quiche's
/// own default).
pub const DEFAULT_CC: &str = "cubic";

/// The server's options from its configuration file.
pub fn server_options(cfg: &ServerConfig) -> Result<crate::server::Options, String> {
    let cc = congestion_control(&check_cc("cc", &cfg.cc, CC_NAMES, DEFAULT_CC)?)?;
    let (max_data, max_stream_data) = cfg.windows();
    let settings = Settings {
        cc,
        max_datagram_size: cfg.datagram_size() as usize,
        max_data,
        max_stream_data,
        idle_timeout: crate::server::IDLE_TIMEOUT,
        keylog: !cfg.keylog.is_empty(),
    };
    transport::validate(&settings)?;
    let host: IpAddr = cfg
        .host
        .parse()
        .map_err(|_| format!("host {:?}: not an IP address", cfg.host))?;
    let nonempty = |s: &str| (!s.is_empty()).then(|| PathBuf::from(s));
    Ok(crate::server::Options {
        listen: SocketAddr::new(host, cfg.port),
        cert: cfg.cert.clone(),
        key: cfg.key.clone(),
        settings,
        socket_buffer: cfg.socket_buffer as usize,
        qlog_dir: nonempty(&cfg.qlog_dir),
        keylog: nonempty(&cfg.keylog),
        resources: cfg.resources("quiche")?,
    })
}

/// qb-quiche-server's main: returns the exit status.
pub fn server_main(args: &[String]) -> i32 {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["--version"] => {
            println!("{}", transport::version());
            0
        }
        ["--check"] => print_check(),
        ["--config", file] => {
            let opts = ServerConfig::load(Path::new(file)).and_then(|c| server_options(&c));
            match opts.and_then(crate::server::run) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("qb-quiche-server: {e}");
                    1
                }
            }
        }
        _ => {
            eprintln!("usage: qb-quiche-server --config FILE | --version | --check");
            2
        }
    }
}

/// qb-quiche-client's main: returns the exit status (0 whenever a record
/// was printed, 2 for an unusable request).
pub fn client_main(args: &[String]) -> i32 {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["--version"] => {
            println!("{}", transport::version());
            0
        }
        ["--check"] => print_check(),
        [] => crate::client::main_with(None, None),
        [file] if !file.starts_with('-') => crate::client::main_with(Some(Path::new(file)), None),
        ["--bodies", dir] => crate::client::main_with(None, Some(Path::new(dir))),
        ["--bodies", dir, file] => {
            crate::client::main_with(Some(Path::new(file)), Some(Path::new(dir)))
        }
        _ => {
            eprintln!(
                "usage: qb-quiche-client [--bodies DIR] [REQUEST.json] | --version | --check"
            );
            2
        }
    }
}

fn print_check() -> i32 {
    match check() {
        Ok(v) => {
            println!("{v}");
            0
        }
        Err(e) => {
            eprintln!("quiche self-check: {e}");
            1
        }
    }
}

/// The self-check: a client connection in memory sends its Initial, its
/// probe timeout fires and re-sends it, and the statistics this peer
/// reports (quiche's `stats()` and `path_stats()`) must show it. Every
/// congestion controller must be accepted by quiche.
pub fn check() -> Result<serde_json::Value, String> {
    for name in CC_NAMES {
        let cc = congestion_control(name)?;
        let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| e.to_string())?;
        c.set_cc_algorithm_name(cc.name)
            .map_err(|e| format!("quiche refuses congestion control {}: {e}", cc.name))?;
    }
    let settings = Settings {
        cc: congestion_control(DEFAULT_CC)?,
        max_datagram_size: 1452,
        max_data: 15 << 20,
        max_stream_data: 6 << 20,
        idle_timeout: Duration::from_secs(30),
        keylog: false,
    };
    let mut config = transport::config(&settings)?;
    let scid = quiche::ConnectionId::from_ref(&[7; 16]);
    let local: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let peer: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let mut conn = quiche::connect(Some("localhost"), &scid, local, peer, &mut config)
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 1500];
    let mut sent = 0;
    while let Ok((n, _)) = conn.send(&mut buf) {
        sent += n;
    }
    let t = conn
        .timeout()
        .ok_or("no loss-detection timer after the Initial")?;
    std::thread::sleep(t);
    conn.on_timeout();
    while let Ok((n, _)) = conn.send(&mut buf) {
        sent += n;
    }
    let st = conn.stats();
    let p = conn.path_stats().next().ok_or("no path statistics")?;
    let ok = sent > 0 && st.sent >= 2 && p.total_pto_count >= 1 && p.cwnd > 0 && !p.rtt.is_zero();
    let v = serde_json::json!({
        "version": transport::version(),
        "cc": CC_NAMES,
        "stats": {
            "bytes_sent": sent,
            "packets_sent": st.sent,
            "pto_count": p.total_pto_count,
            "cwnd": p.cwnd,
            "srtt_ms": p.rtt.as_secs_f64() * 1000.0,
        },
    });
    if !ok {
        return Err(format!("quiche's statistics read nothing: {v}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_check_passes() {
        let v = check().unwrap();
        assert!(v["version"].as_str().unwrap().starts_with("quiche "));
        assert!(v["stats"]["pto_count"].as_u64().unwrap() >= 1);
    }

    fn config_json(cc: &str) -> String {
        let d = std::env::temp_dir().join(format!("qb-quiche-cli-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (c, k) = (d.join("cert.pem"), d.join("key.pem"));
        std::fs::write(&c, "x").unwrap();
        std::fs::write(&k, "x").unwrap();
        format!(r#"{{"host":"127.0.0.1","port":0,"cert":{c:?},"key":{k:?},"cc":"{cc}"}}"#)
    }

    #[test]
    fn server_options_map_cc_and_defaults() {
        let cfg = ServerConfig::parse(&config_json("bbr")).unwrap();
        let o = server_options(&cfg).unwrap();
        assert_eq!(o.settings.cc.name, "bbr2_gcongestion");
        assert_eq!(o.settings.max_datagram_size, 1452);
        assert_eq!(
            (o.settings.max_data, o.settings.max_stream_data),
            (15 << 20, 6 << 20)
        );
        assert!(o.qlog_dir.is_none() && o.keylog.is_none());
        let cfg = ServerConfig::parse(&config_json("")).unwrap();
        assert_eq!(server_options(&cfg).unwrap().settings.cc.name, "cubic");
        let cfg = ServerConfig::parse(&config_json("vegas")).unwrap();
        let e = server_options(&cfg).err().unwrap();
        assert!(e.contains("vegas") && e.contains("reno, cubic, bbr"), "{e}");
    }

    #[test]
    fn usage_errors_exit_2() {
        assert_eq!(server_main(&["--bogus".to_string()]), 2);
        assert_eq!(server_main(&[]), 2);
        assert_eq!(client_main(&["--bogus".to_string()]), 2);
    }
}

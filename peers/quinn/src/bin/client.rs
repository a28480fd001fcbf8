//! qb-quinn-client: quicbench's HTTP/3 client on quinn (see README.md).
//!
//! Reads one JSON request on stdin (or from the file named by its only
//! argument), runs it over one HTTP/3 connection and prints one JSON
//! record on stdout. Exit status 0 whenever a record was printed (failed
//! samples included, with "error"), 2 for an unusable request.
//! `--version` prints the versions it was built with; `--check` runs the
//! self-check.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::SystemTime;

use qbpeer::record::{Clock, Record};
use qbpeer::ClientRequest;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--version"] => {
            println!("{}", qb_quinn::versions_json());
            return ExitCode::SUCCESS;
        }
        ["--check"] => return qb_quinn::check::main(),
        [] => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map(|_| s).map_err(|e| format!("stdin: {e}"))
        }
        [file] if !file.starts_with('-') => std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}")),
        _ => Err("usage: qb-quinn-client [REQUEST.json] < REQUEST.json | --check | --version".into()),
    };
    let req = match text.and_then(|t| ClientRequest::parse(&t)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("qb-quinn-client: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = qb_quinn::Cc::from_name("congestion_control", &req.congestion_control) {
        eprintln!("qb-quinn-client: {e}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("qb-quinn-client: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rec = Record { version: qb_quinn::version(), ..Default::default() };
    rec.cpu_start = Some(qbpeer::sys::cpu_time().into());
    rec.started_unix_ns =
        Some(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64));
    let clock = Clock::start();
    // run() stops the requests at the timeout itself and closes the
    // connection; this bounds the rest (resolving, closing) too.
    let total = std::time::Duration::from_secs_f64(req.timeout) + std::time::Duration::from_secs(5);
    let result = rt.block_on(async {
        match tokio::time::timeout(total, qb_quinn::client::run(&req, &mut rec, clock)).await {
            Ok(r) => r,
            Err(_) => Err(format!("timeout (total, {}s)", req.timeout)),
        }
    });
    if let Err(e) = result {
        rec.error = Some(e);
    }
    if !req.qlog_dir.is_empty() && rec.qlogs.is_none() {
        rec.qlogs = Some(qbpeer::record::list_qlogs(&req.qlog_dir));
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let printed = serde_json::to_writer(&mut out, &rec)
        .map_err(|e| e.to_string())
        .and_then(|()| out.write_all(b"\n").and_then(|()| out.flush()).map_err(|e| e.to_string()));
    if let Err(e) = printed {
        eprintln!("qb-quinn-client: printing the record: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

//! qb-quinn-server: quicbench's HTTP/3 server on quinn (see README.md).
//!
//! `qb-quinn-server --config FILE` serves until its standard input ends,
//! printing the peer program protocol's lines on stdout; `--version`
//! prints the versions it was built with; `--check` runs the self-check.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use qb_quinn::server::Server;
use qbpeer::events;
use qbpeer::ServerConfig;
use tokio::sync::Notify;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--version"] => {
            println!("{}", qb_quinn::versions_json());
            ExitCode::SUCCESS
        }
        ["--check"] => qb_quinn::check::main(),
        ["--config", path] => serve(Path::new(path)),
        _ => {
            eprintln!("usage: qb-quinn-server --config FILE | --check | --version");
            ExitCode::from(2)
        }
    }
}

fn serve(path: &Path) -> ExitCode {
    let cfg = match ServerConfig::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qb-quinn-server: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("qb-quinn-server: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let server = match Server::bind(&cfg) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("qb-quinn-server: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        events::ready(&server.ready);
        let stop = Arc::new(Notify::new());
        let on_eof = stop.clone();
        let (ask, asks) = tokio::sync::mpsc::unbounded_channel();
        qbpeer::sys::on_stdin(
            move |addr| {
                let _ = ask.send(addr);
            },
            move || on_eof.notify_one(),
        );
        server.run(stop, Some(asks), Arc::new(qb_quinn::server::Stdout)).await;
        ExitCode::SUCCESS
    })
}

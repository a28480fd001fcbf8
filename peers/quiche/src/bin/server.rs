//! qb-quiche-server: quicbench's HTTP/3 server on quiche (see README.md).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(qb_quiche::cli::server_main(&args));
}

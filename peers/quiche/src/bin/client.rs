//! qb-quiche-client: quicbench's HTTP/3 client on quiche (see README.md).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(qb_quiche::cli::client_main(&args));
}

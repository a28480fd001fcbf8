//! Passes the versions of quinn, quinn-proto, h3, h3-quinn and rustls that
//! peers/Cargo.lock pins to the build (QB_*_VERSION), so that the programs
//! report exactly what they were built with.

use std::path::Path;

fn main() {
    let lock_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
    for (krate, var) in [
        ("quinn", "QB_QUINN_VERSION"),
        ("quinn-proto", "QB_QUINN_PROTO_VERSION"),
        ("h3", "QB_H3_VERSION"),
        ("h3-quinn", "QB_H3_QUINN_VERSION"),
        ("rustls", "QB_RUSTLS_VERSION"),
    ] {
        let versions: Vec<&str> = lock
            .split("[[package]]")
            .filter(|p| p.lines().any(|l| l.trim() == format!("name = \"{krate}\"")))
            .filter_map(|p| p.lines().find_map(|l| l.trim().strip_prefix("version = \"")?.strip_suffix('"')))
            .collect();
        match versions.as_slice() {
            [v] => println!("cargo:rustc-env={var}={v}"),
            _ => panic!("Cargo.lock holds {} versions of {krate}: {versions:?}", versions.len()),
        }
    }
}

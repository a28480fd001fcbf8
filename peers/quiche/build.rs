//! Records the version of quiche this crate is built with (from the
//! workspace's Cargo.lock, which `--locked` builds follow) as QUICHE_VERSION.

use std::path::Path;

fn main() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let mut version = None;
    let mut in_quiche = false;
    for line in text.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            in_quiche = false;
        } else if line == "name = \"quiche\"" {
            in_quiche = true;
        } else if in_quiche {
            if let Some(v) = line
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
            {
                version = Some(v.to_string());
                break;
            }
        }
    }
    let version = version.unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=QUICHE_VERSION={version}");
}

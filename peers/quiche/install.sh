#!/usr/bin/env bash
# The quiche peer: its crate in the Cargo workspace peers/Cargo.toml, every
# crate pinned in peers/Cargo.lock, BoringSSL built from its vendored
# source (cargo does nothing when it is built).
set -euo pipefail
cargo build --release --locked --quiet --manifest-path peers/Cargo.toml -p qb-quiche

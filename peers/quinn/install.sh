#!/usr/bin/env bash
# The quinn peer: its crate in the Cargo workspace peers/Cargo.toml, every
# crate pinned in peers/Cargo.lock (cargo does nothing when it is built).
set -euo pipefail
cargo build --release --locked --quiet --manifest-path peers/Cargo.toml -p qb-quinn

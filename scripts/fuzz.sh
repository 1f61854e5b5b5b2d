#!/usr/bin/env bash
# Fuzzes tessera-node's request parser with cargo-fuzz (nightly). Not part of CI.
# FUZZ_SECONDS (default 60) bounds the run.
set -euo pipefail
cd "$(dirname "$0")/../node/fuzz"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
if ! rustup toolchain list | grep -q nightly; then
    rustup toolchain install nightly --profile minimal
fi
cargo +nightly fuzz run request_parser -- -max_total_time="${FUZZ_SECONDS:-60}" -max_len=4096

#!/usr/bin/env bash
# The test command: installs peers, builds, checks the rules (scripts/check.sh: fmt, clippy, sans-IO), and runs the whole test suite (unit, property, loopback interop
# with Globus/curl/lftp/ftplib, and WAN-lab tests when run as root). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check.sh
export DRSFTP_BIN="$PWD/target/release/drsftp"
cargo test --release --locked --workspace --no-fail-fast 2>&1
# Every fuzz target for a bounded 10 s from its committed seed corpus (a crash fails the run).
bash scripts/fuzz.sh --secs 10

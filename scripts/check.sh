#!/usr/bin/env bash
# The project's rules, checked before the tests (scripts/test.sh runs this; so does CI through .ci/run):
#  1. rustfmt: every file formatted;
#  2. clippy on every target with warnings as errors;
#  3. the sans-IO crates' library code reads no clock, sleeps, spawns no thread and opens no socket or file
#     (scripts/sans-io/clippy.toml), and none of them depends on tokio outside dev-dependencies.
# `unsafe` outside drsftp-sys is refused by the compiler itself (workspace lint unsafe_code = "forbid").
set -euo pipefail
cd "$(dirname "$0")/.."
SANS_IO=(drsftp-proto drsftp-tune drsftp-blast drsftp-netem drsftp-units)

echo "check: cargo fmt" >&2
cargo fmt --all -- --check
rustfmt --check --edition 2021 fuzz/fuzz_targets/*.rs
echo "check: cargo clippy (all targets, -D warnings)" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "check: sans-IO crates (${SANS_IO[*]}): no clock, sleep, thread or socket in library code" >&2
pkgs=()
for c in "${SANS_IO[@]}"; do pkgs+=(-p "$c"); done
CLIPPY_CONF_DIR="$PWD/scripts/sans-io" cargo clippy "${pkgs[@]}" --lib --locked --no-deps -- \
  -D clippy::disallowed_methods -D clippy::disallowed_types
for c in "${SANS_IO[@]}"; do
  if cargo tree --locked -p "$c" -e normal --prefix none | grep -qE '^(tokio|mio|async-std|smol) '; then
    echo "check: $c depends on an async runtime outside dev-dependencies:" >&2
    cargo tree --locked -p "$c" -e normal -i tokio >&2 || true
    exit 1
  fi
done
echo "check: ok" >&2

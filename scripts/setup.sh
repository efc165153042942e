#!/usr/bin/env bash
# Installs everything drsftp's demo, tests and benchmarks need on a fresh Debian machine, then builds.
# Idempotent: packages already present are not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."

# python3-pyftpdlib + python3-openssl: a TLS FTP server without SSCN for the third-party TLS tests; tcpdump:
# the PROT P tests capture loopback and look for cleartext.
pkgs=(globus-gridftp-server-progs globus-gass-copy-progs iperf3 curl lftp iproute2 iputils-ping python3 python3-pyftpdlib python3-openssl procps bc tcpdump)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
# cargo-deb builds the Debian package (crates/drsftp/tests/package_install.rs installs it in a throw-away overlay).
if ! cargo deb --version >/dev/null 2>&1; then
  echo "setup: installing cargo-deb" >&2
  cargo install cargo-deb --locked >&2
fi
cargo build --release --locked -p drsftp >&2

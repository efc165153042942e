#!/usr/bin/env bash
# The main job on a built-in default: installs what is needed, builds, then runs a real loopback transfer
# (a drsftp server, a generated file, 4 parallel MODE E streams) and prints speed and buffer use.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec ./target/release/drsftp demo "$@"

#!/bin/sh
# Measure the WAN lab through real labs (RTT, TCP rate, loss, forwarder ceiling, 100 Mbit/s · 100 ms baselines).
# Usage: bench/lab-bench.sh [secs-per-iperf3-run] [parts] [report.md]   (needs root, /dev/net/tun, iperf3)
# Same as `drsftp lab bench --secs N --only PARTS --out FILE`. Bounded: roughly 5 + 27 x secs seconds for all parts.
set -eu
cd "$(dirname "$0")/.."
SECS=${1:-10}
PARTS=${2:-rtt,rate,loss,ceiling,baseline}
OUT=${3:-/tmp/lab-bench.md}
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target-lab} cargo build --release -q -p drsftp-lab --example lab_bench
"${CARGO_TARGET_DIR:-target-lab}/release/examples/lab_bench" "$SECS" "$PARTS" "$OUT"
echo "report: $OUT"
ip netns list | grep '^drs-b' && echo "WARNING: bench namespaces left behind" >&2 || true

#!/bin/sh
# Measure the WAN lab through real labs (RTT, TCP rate, loss, forwarder ceiling, 100 Mbit/s · 100 ms baselines).
# Usage: bench/lab-bench.sh [--secs N] [--only PARTS] [--out report.md]
#        bench/lab-bench.sh [secs] [parts] [report.md]          (positional form, same meaning)
# PARTS is a comma list of rtt,rate,loss,ceiling,baseline,perpacket (default: all). Needs root, /dev/net/tun, iperf3.
# Same as `drsftp lab bench --secs N --only PARTS --out FILE`, but builds only drsftp-lab (example lab_bench), so
# it works while other crates of the workspace do not compile. Bounded: roughly 5 + 27 x secs seconds for all parts.
# Every lab it brings up is torn down on exit, also on failure or Ctrl-C (the lab's watchdog).
set -eu
cd "$(dirname "$0")/.."
SECS=10
PARTS=rtt,rate,loss,ceiling,baseline,perpacket
OUT=/tmp/lab-bench.md
n=0
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) SECS=$2; shift 2 ;;
        --only) PARTS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) case $n in 0) SECS=$1 ;; 1) PARTS=$1 ;; 2) OUT=$1 ;; *) echo "too many arguments" >&2; exit 2 ;; esac
           n=$((n + 1)); shift ;;
    esac
done
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p drsftp-lab --example lab_bench
"$TARGET/release/examples/lab_bench" "$SECS" "$PARTS" "$OUT"
echo "report: $OUT"
if ip netns list | grep '^drs-b'; then
    echo "WARNING: bench namespaces left behind" >&2
    exit 1
fi

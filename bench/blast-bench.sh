#!/bin/sh
# UDP blast benchmark on the WAN lab (issue 6; report in docs/bench/blast.md). Needs root, /dev/net/tun, iperf3.
# Usage: bench/blast-bench.sh [--parts rates,udt,fair,probe,ackfreq] [--rate 500mbit] [--secs 16] [--reps 1] [--out DIR]
# Runs target/release/examples/bench_blast once per part (each part prints a markdown table and writes
# DIR/PART.md); every lab is torn down on exit, also on failure or Ctrl-C. Roughly: ackfreq 8 min, probe 3 min,
# rates 4 x (3 x secs + 2 copies) ~ 6 min, fair 2 min at the defaults. The udt part compares with UDT4 and needs
# BENCH_UDT=path of a small harness linked against Debian's libudt-dev (`udtperf s PORT` receives and prints
# {"bytes":..,"seconds":..,"mbps":..}; `udtperf c HOST PORT BYTES` sends); without it that part fails and the others run.
set -eu
cd "$(dirname "$0")/.."
PARTS=rates,udt,fair,probe,ackfreq
RATE=500mbit
SECS=16
REPS=1
OUT=/tmp/blast-bench
while [ $# -gt 0 ]; do
    case "$1" in
        --parts) PARTS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --secs) SECS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p drsftp --bin drsftp --example bench_blast
mkdir -p "$OUT"
for p in $(echo "$PARTS" | tr ',' ' '); do
    echo "== $p ($(cut -d' ' -f1-3 /proc/loadavg))"
    "$TARGET/release/examples/bench_blast" --only "$p" --rate "$RATE" --secs "$SECS" --reps "$REPS" \
        --drsftp "$TARGET/release/drsftp" --out "$OUT/$p.md" || echo "part $p failed"
done
echo "reports in $OUT"
if ip netns list | grep '^drs-bb'; then
    echo "WARNING: bench namespaces left behind" >&2
    exit 1
fi

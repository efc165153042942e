#!/usr/bin/env bash
# UDP blast benchmark on the WAN lab (issue 6; report in docs/bench/blast.md). Needs root, /dev/net/tun, iperf3.
# Usage: bench/blast-bench.sh [--parts rates,udt,fair,probe,ackfreq] [--rate 500mbit] [--secs 16] [--reps 1] [--out DIR]
#                             [--record]
# Builds drsftp and drsftp-bench and runs `target/release/drsftp-bench blast` once per part (each part prints a
# markdown table and writes DIR/PART.md); every lab is torn down on exit, also on failure or Ctrl-C. Roughly: ackfreq
# 8 min, probe 3 min, rates 4 x (3 x secs + 2 copies) ~ 6 min, fair 2 min at the defaults. The udt part compares with
# UDT4 and needs BENCH_UDT=path of a small harness linked against Debian's libudt-dev (`udtperf s PORT` receives and
# prints {"bytes":..,"seconds":..,"mbps":..}; `udtperf c HOST PORT BYTES` sends); without it that part fails and the
# others run. --record also writes a run folder bench/runs/<date>-<commit>-blast-bench/ (command.txt, machine.txt,
# the parts' reports one after the other as README.md).
set -eu
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
PARTS=rates,udt,fair,probe,ackfreq
RATE=500mbit
SECS=16
REPS=1
OUT=/tmp/blast-bench
RECORD=0
while [ $# -gt 0 ]; do
    case "$1" in
        --parts) PARTS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --secs) SECS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --record) RECORD=1; shift ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
bench_build
mkdir -p "$OUT"
for p in $(echo "$PARTS" | tr ',' ' '); do
    echo "== $p ($(cut -d' ' -f1-3 /proc/loadavg))"
    "$BENCH_TARGET/release/drsftp-bench" blast --only "$p" --rate "$RATE" --secs "$SECS" --reps "$REPS" \
        --drsftp "$BENCH_TARGET/release/drsftp" --out "$OUT/$p.md" || echo "part $p failed"
done
echo "reports in $OUT"
if [ "$RECORD" = 1 ]; then
    report=$(mktemp)
    for p in $(echo "$PARTS" | tr ',' ' '); do
        { echo "## $p"; echo; cat "$OUT/$p.md" 2>/dev/null || echo "(part $p failed)"; echo; } >>"$report"
    done
    record_run blast-bench "$report"
    rm -f "$report"
fi
if ip netns list | grep '^drs-bb'; then
    echo "WARNING: bench namespaces left behind" >&2
    exit 1
fi

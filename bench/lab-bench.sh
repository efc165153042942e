#!/usr/bin/env bash
# Measure the WAN lab through real labs (RTT, TCP rate, loss, forwarder ceiling, 100 Mbit/s · 100 ms baselines).
# Usage: bench/lab-bench.sh [--secs N] [--only PARTS] [--out report.md] [--record]
#        bench/lab-bench.sh [secs] [parts] [report.md]          (positional form, same meaning)
# PARTS is a comma list of rtt,rate,loss,ceiling,baseline,perpacket (default: all). Needs root, /dev/net/tun, iperf3.
# Builds drsftp and drsftp-bench and runs `drsftp-bench lab --secs N --only PARTS --out FILE`. Bounded: roughly
# 5 + 27 x secs seconds for all parts. Every lab it brings up is torn down on exit, also on failure or Ctrl-C (the
# lab's watchdog). --record also writes a run folder bench/runs/<date>-<commit>-lab-bench/ (command.txt,
# machine.txt, the report as README.md).
set -eu
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
SECS=10
PARTS=rtt,rate,loss,ceiling,baseline,perpacket
OUT=/tmp/lab-bench.md
RECORD=0
n=0
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) SECS=$2; shift 2 ;;
        --only) PARTS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --record) RECORD=1; shift ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) case $n in 0) SECS=$1 ;; 1) PARTS=$1 ;; 2) OUT=$1 ;; *) echo "too many arguments" >&2; exit 2 ;; esac
           n=$((n + 1)); shift ;;
    esac
done
bench_build
"$BENCH_TARGET/release/drsftp-bench" lab --secs "$SECS" --only "$PARTS" --out "$OUT"
echo "report: $OUT"
if [ "$RECORD" = 1 ]; then record_run lab-bench "$OUT"; fi
if ip netns list | grep '^drs-b'; then
    echo "WARNING: bench namespaces left behind" >&2
    exit 1
fi

#!/usr/bin/env bash
# Issue 22, loopback and CPU efficiency: file-to-file drsftp (-p 1 and -p 4, CRC32C verified, /dev/shm) against
# iperf3 memory to memory and globus-url-copy <- globus-gridftp-server, all in one run, interleaved; prints the
# ratios to iperf3, CPU seconds per GiB of each end and RSS peak/mean of each end (bench/lib/loopeff.py does the
# measuring). --placement adds single-stream runs with both ends pinned to one core and to two cores, which is
# where the run-to-run spread comes from (docs/bench/loopback.md).
# Usage: bench/loopback-eff.sh [--record] [--placement] [SIZE_MIB] [ROUNDS]   (defaults 2048 and 3; DRSFTP_BIN=path
#        uses that binary instead of building). --record writes bench/runs/<date>-<commit>-loopback-eff/.
set -euo pipefail
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
RECORD=0
PLACEMENT=0
while [ $# -gt 0 ]; do
  case $1 in
    --record) RECORD=1 ;;
    --placement) PLACEMENT=1 ;;
    *) break ;;
  esac
  shift
done
SIZE_MIB=${1:-${SIZE_MIB:-2048}}
ROUNDS=${2:-${ROUNDS:-3}}
if [ -n "${DRSFTP_BIN:-}" ]; then
  BIN=$DRSFTP_BIN
else
  bench_build
  BIN=$BENCH_TARGET/release/drsftp
fi
for t in iperf3 globus-url-copy globus-gridftp-server taskset python3; do
  command -v $t >/dev/null || { echo "needs $t (run scripts/setup.sh)"; exit 1; }
done
work=$(mktemp -d /dev/shm/drsftp-loopeff.XXXXXX)
chmod 0777 "$work"
trap 'rm -rf "$work"' EXIT
python3 bench/lib/loopeff.py "$work" "$BIN" "$SIZE_MIB" "$ROUNDS" "$PLACEMENT" | tee "$work/report.md"
if [ "$RECORD" = 1 ]; then
  record_run loopback-eff "$work/report.md" "$work/results.csv"
fi

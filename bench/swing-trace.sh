#!/bin/bash
# One traced download on the time-varying lab path (bench/profiles/drs-gridftp-swing.profile), for looking at what
# the SENDER's congestion control does beside the receiver's DRS trace: `ss -tin` in the sending host every
# ~100 ms (cwnd, ssthresh, rtt of each established socket but the control one) into OUT/ss-TAG.txt, and
# `drsftp copy --trace` into OUT/trace-TAG.csv. This is how the time-varying row's failure was found
# (docs/bench/drs-gridftp.md, "Why, and the fix").
#
#   bench/swing-trace.sh [--record] DRSFTP_BIN BUFFER TAG [OUT]   e.g. bench/swing-trace.sh target/release/drsftp drs r1
#   XENV="VAR=VALUE" passes an environment variable to the receiving `drsftp copy`.
#   --record also writes a run folder bench/runs/<date>-<commit>-swing-trace/ (command.txt, machine.txt, the trace
#   CSV, the copy's JSON summary, the ss samples and the TCP counters, a short report as README.md); it builds
#   drsftp-bench (which writes the folder) if target/release/drsftp-bench is missing.
#
# Needs root (network namespaces). Traffic stays inside the lab (198.18.0.0/15); the lab is taken down on exit.
set -euo pipefail
RECORD_ARGV=("$0" "$@")
. "$(dirname "$0")/lib/record.sh"
RECORD=0
if [ "${1:-}" = --record ]; then RECORD=1; shift; fi
BIN=$(realpath "$1"); BUF=$2; TAG=$3; OUT=${4:-/tmp/drsftp-swing-trace}
PROFILE=$(dirname "$(realpath "$0")")/profiles/drs-gridftp-swing.profile
SRC=$OUT/src; L=swtrace
mkdir -p "$OUT" "$SRC"
[ -f "$SRC/f256" ] || head -c 268435456 /dev/urandom > "$SRC/f256"
"$BIN" lab up $L --hosts 2 --rtt 100ms --rate 100mbit --profile "$PROFILE" > "$OUT/lab.log" 2>&1
T0=$(date +%s.%N)
SERVE=""; SAMPLER=""
cleanup() {
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null || true
    "$BIN" lab down $L > /dev/null 2>&1 || true
    rm -f "$OUT/dest-$TAG"
}
trap cleanup EXIT
"$BIN" lab exec $L h2 -- "$BIN" serve --listen 198.18.0.2:2121 --root "$SRC" --anonymous --buffer "$BUF" \
    --congestion cubic > "$OUT/serve-$TAG.log" 2>&1 &
SERVE=$!
sleep 1
# Start at the profile's next period boundary (32 s), as the benchmark does.
sleep "$(python3 -c "import math,time;t=time.time()-$T0;print(math.ceil(t/32)*32-t)")"
(
    while true; do
        echo "T $(date +%s.%N)"
        "$BIN" lab exec $L h2 -- ss -tin state established '( sport != :2121 )' 2>/dev/null \
            | grep -o 'cwnd:[0-9]*\|rtt:[0-9.]*\|ssthresh:[0-9]*' | tr '\n' ' ' || true
        echo
        sleep 0.1
    done
) > "$OUT/ss-$TAG.txt" &
SAMPLER=$!
echo "start $(date +%s.%N)" > "$OUT/start-$TAG.txt"
"$BIN" lab exec $L h1 -- env ${XENV:-DRSFTP_TRACE_RUN=1} "$BIN" copy ftp://198.18.0.2:2121/f256 "$OUT/dest-$TAG" \
    --buffer "$BUF" --congestion cubic -p 1 --json --trace "$OUT/trace-$TAG.csv" > "$OUT/copy-$TAG.json"
cat "$OUT/copy-$TAG.json"
# The hosts' TCP counters (each lab host is a fresh namespace, so these are this transfer's): the receiver pruning
# its queues (PruneCalled, OfoPruned, RcvPruned: memory over SO_RCVBUF), and the sender seeing SACK reneging.
for h in h1 h2; do
    echo "$h $("$BIN" lab exec $L $h -- nstat -az 2>/dev/null \
        | awk '/Prune|OFODrop|RcvQDrop|SACKReneging|TCPOFOQueue|TCPLossProbes |TCPSackRecovery |TCPTimeouts /{printf "%s=%s ", $1, $2}')"
done | tee "$OUT/nstat-$TAG.txt"
if [ "$RECORD" = 1 ]; then
    {
        echo "# Swing trace $TAG: one download on the time-varying lab path, --buffer $BUF, cubic, 1 stream"
        echo
        echo "Profile: bench/profiles/drs-gridftp-swing.profile. Files: trace-$TAG.csv (drsftp copy --trace),"
        echo "ss-$TAG.txt (sender's cwnd/ssthresh/rtt every ~100 ms), copy-$TAG.json, nstat-$TAG.txt."
        echo
        echo '```json'
        cat "$OUT/copy-$TAG.json"
        echo '```'
        echo
        echo '```'
        cat "$OUT/nstat-$TAG.txt"
        echo '```'
    } >"$OUT/report-$TAG.md"
    record_run swing-trace "$OUT/report-$TAG.md" "$OUT/trace-$TAG.csv" "$OUT/copy-$TAG.json" "$OUT/ss-$TAG.txt" \
        "$OUT/nstat-$TAG.txt"
fi

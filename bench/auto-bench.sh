#!/usr/bin/env bash
# Issue 5: `drsftp copy` with -p auto (the default) vs globus-url-copy with hand-tuned -p / -tcp-bs on a 2-host WAN lab.
# Both clients download the same file from the same `drsftp serve` (host 2 -> host 1), so only the client's choice
# of streams and buffers differs. Runs are interleaved (one of every case per round, order rotated each round);
# throughput = bytes on disk / wall time of the client process (login and slow start included). A run is cut at
# SECS seconds (`timeout`), then the bytes it had written count (allocated bytes of the output on tmpfs, so sparse
# MODE E files count what arrived). Prints per-case medians, the best globus-url-copy case and auto / best.
# Usage (root): bench/auto-bench.sh [--rtt 100ms] [--rate 1gbit] [--loss 0] [--cc cubic] [--size-mib 1024]
#               [--secs 30] [--reps 3] [--streams 1,2,4,8,16] [--bufs 256K,1M,4M,16M] [--grid guc|drsftp] [--out FILE]
#               [--record]
# --grid drsftp: the grid is `drsftp copy -p P --tcp-bs B` instead of globus-url-copy (auto vs a full grid; the
# mem_bytes column is drsftp's peak receive-buffer sum over streams, JSON buffer_bytes, for auto and grid alike:
# DRS's window clamps, SO_RCVBUF/2 for a fixed --tcp-bs; win_bytes is the peak sum of the advertised receive windows,
# TCP_INFO rcv_wnd every 20 ms, JSON window_peak_bytes: the same kernel meter for every policy).
# --cc is set on the server's data sockets (`drsftp serve --congestion`): for downloads the sender's choice is what
# matters, and it is the same for both clients. DRSFTP_BIN=path uses that binary (default: builds drsftp and
# drsftp-bench, uses target/release/drsftp).
# The lab (drs-t5aNNNNN-h1/h2) and the server are removed on exit, also on failure or Ctrl-C. With --out FILE the
# report goes to FILE, the per-run CSV to FILE.csv, auto's JSON lines to FILE.jsonl and the server's log (the -p auto
# controller's decisions, per run) to FILE.serve.log. --record also writes a run folder
# bench/runs/<date>-<commit>-auto-bench/ (command.txt, machine.txt, results.csv, auto.jsonl, the report as README.md).
set -euo pipefail
RECORD_ARGV=("$0" "$@")
. "$(dirname "$0")/lib/record.sh"
RTT=100ms RATE=1gbit LOSS=0 CC=cubic SIZE_MIB=1024 SECS=30 REPS=3 STREAMS=1,2,4,8,16 BUFS=256K,1M,4M,16M OUT= GRID=guc
RECORD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --record) RECORD=1; shift; continue ;;
    --rtt) RTT=$2 ;; --rate) RATE=$2 ;; --loss) LOSS=$2 ;; --cc) CC=$2 ;; --size-mib) SIZE_MIB=$2 ;;
    --secs) SECS=$2 ;; --reps) REPS=$2 ;; --streams) STREAMS=$2 ;; --bufs) BUFS=$2 ;; --out) OUT=$2 ;; --grid) GRID=$2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
if [ -n "${DRSFTP_BIN:-}" ]; then
  BIN=$DRSFTP_BIN
else
  bench_build
  BIN=$BENCH_TARGET/release/drsftp
fi
command -v globus-url-copy >/dev/null || { echo "needs globus-url-copy"; exit 1; }
LAB=t5a$(($$ % 100000))
WORK=/dev/shm/drs-$LAB
echo "lab $LAB (namespaces drs-$LAB-h1, drs-$LAB-h2), work dir $WORK"
srv=
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null || true
  [ -n "$srv" ] && wait "$srv" 2>/dev/null || true
  "$BIN" lab down "$LAB" >/dev/null 2>&1 || true
  [ -n "$OUT" ] && [ -f "$WORK/serve.log" ] && sed 's/\x1b\[[0-9;]*m//g' "$WORK/serve.log" >"$OUT.serve.log"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/root" "$WORK/out"
head -c $((SIZE_MIB * 1048576)) /dev/urandom >"$WORK/root/big"
lossarg=(); [ "$LOSS" != 0 ] && lossarg=(--loss "$LOSS")
"$BIN" lab up "$LAB" --rtt "$RTT" --rate "$RATE" "${lossarg[@]}" --hosts 2 >"$WORK/lab.txt"
"$BIN" lab exec "$LAB" h2 -- "$BIN" serve --listen 198.18.0.2:2811 --anonymous --root "$WORK/root" \
  --congestion "$CC" --log "drsftp_io::data::auto=debug,drsftp_io::server::transfer=info,warn" >>"$WORK/serve.log" 2>&1 &
srv=$!
for _ in $(seq 100); do
  "$BIN" lab exec "$LAB" h1 -- bash -c 'exec 3<>/dev/tcp/198.18.0.2/2811' 2>/dev/null && break
  sleep 0.1
done
URL=ftp://198.18.0.2:2811/big

cases=(auto)
for p in ${STREAMS//,/ }; do for b in ${BUFS//,/ }; do cases+=("$GRID-p$p-bs$b"); done; done
declare -A T
res="$WORK/results.csv"
echo "rep,case,seconds,bytes,mbps,streams_start,streams_peak,streams_final,mem_bytes,win_bytes,load1" >"$res"
one() { # case -> appends a CSV line
  local c=$1 d="$WORK/out/run" t0 t1 bytes j="" s0="" sp="" sf="" mem="" win=""
  rm -rf "$d"; mkdir -p "$d"
  echo "=== rep $REP case $c $(date -u +%T.%N)" >>"$WORK/serve.log"
  t0=$(date +%s.%N)
  if [ "$c" = auto ]; then
    j=$("$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy --no-verify --json -q "$URL" "$d/big" 2>"$WORK/err") || true
  elif [ "$GRID" = drsftp ]; then
    local p=${c#drsftp-p}; p=${p%%-bs*}; local b=${c##*-bs}
    j=$("$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy --no-verify --json -q -p "$p" --tcp-bs "$b" "$URL" "$d/big" 2>"$WORK/err") || true
  else
    local p=${c#guc-p}; p=${p%%-bs*}; local b=${c##*-bs}
    "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -p "$p" -tcp-bs "$b" "$URL" "file://$d/big" \
      >/dev/null 2>"$WORK/err" || true
  fi
  t1=$(date +%s.%N)
  bytes=$(du -s --block-size=1 "$d" | cut -f1)
  [ "$bytes" -gt $((SIZE_MIB * 1048576)) ] && bytes=$((SIZE_MIB * 1048576))
  if [ -n "$j" ]; then
    s0=$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("streams",""))' 2>/dev/null || true)
    sp=$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("auto_peak_streams") or "")' 2>/dev/null || true)
    sf=$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("auto_final_streams") or "")' 2>/dev/null || true)
    mem=$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("buffer_bytes") or "")' 2>/dev/null || true)
    win=$(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("window_peak_bytes") or "")' 2>/dev/null || true)
    echo "$j" >>"$WORK/auto.jsonl"
  fi
  local secs mbps
  secs=$(echo "$t1 - $t0" | bc -l)
  mbps=$(echo "$bytes * 8 / $secs / 1000000" | bc -l)
  printf "%s,%s,%.2f,%s,%.1f,%s,%s,%s,%s,%s,%s\n" "$REP" "$c" "$secs" "$bytes" "$mbps" "$s0" "$sp" "$sf" "$mem" "$win" \
    "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$res" >&2
}
for REP in $(seq 1 "$REPS"); do
  n=${#cases[@]}
  for i in $(seq 0 $((n - 1))); do one "${cases[$(( (i + REP - 1) % n ))]}"; done
done
report() {
  echo "# auto vs $GRID grid: RTT $RTT, rate $RATE, loss $LOSS, server cc $CC, ${SIZE_MIB} MiB, cap ${SECS} s, $REPS reps"
  echo "# $(head -c 300 "$WORK/lab.txt" | tr '\n' ' ')"
  echo "# load average at end: $(cat /proc/loadavg)"
  python3 - "$res" <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))
cases = []
for r in rows:
    if r["case"] not in cases: cases.append(r["case"])
med = {c: st.median(float(r["mbps"]) for r in rows if r["case"] == c) for c in cases}
def mem(c, col="mem_bytes"):
    v = [float(r[col]) for r in rows if r["case"] == c and r.get(col)]
    return st.median(v) if v else None
def win(c):
    return mem(c, "win_bytes")
print("| case | median Mbit/s | runs (Mbit/s) | streams start/peak/final (auto) | peak recv buffer MiB (median) | peak advertised window MiB (median) | load1 |")
print("|---|---|---|---|---|---|---|")
for c in cases:
    rs = [r for r in rows if r["case"] == c]
    extra = "; ".join(f'{r["streams_start"]}/{r["streams_peak"]}/{r["streams_final"]}' for r in rs) if c == "auto" else ""
    m = mem(c); ms = f"{m / 1048576:.1f}" if m else ""
    w = win(c); ws = f"{w / 1048576:.1f}" if w else ""
    print(f'| {c} | {med[c]:.0f} | {", ".join(r["mbps"] for r in rs)} | {extra} | {ms} | {ws} | {", ".join(r["load1"] for r in rs)} |')
g = {c: v for c, v in med.items() if c != "auto"}
if g:
    best = max(g, key=g.get)
    print(f"\nbest grid case: {best} {g[best]:.0f} Mbit/s; auto {med['auto']:.0f} Mbit/s; auto / best = {med['auto'] / g[best]:.2f}x")
    ok = [c for c in g if g[c] >= 0.95 * g[best] and mem(c)]
    if ok and mem("auto"):
        cheap = min(ok, key=mem)
        print(f"cheapest grid case within 95 % of the best: {cheap} ({g[cheap]:.0f} Mbit/s, {mem(cheap) / 1048576:.1f} MiB); "
              f"auto memory / that = {mem('auto') / mem(cheap):.2f}x")
    okw = [c for c in g if g[c] >= 0.95 * g[best] and win(c)]
    if okw and win("auto"):
        cheap = min(okw, key=win)
        print(f"by advertised window: cheapest grid case within 95 % of the best: {cheap} ({win(cheap) / 1048576:.1f} MiB); "
              f"auto window / that = {win('auto') / win(cheap):.2f}x")
PY
}
report | tee "$WORK/report.md"
if [ -n "$OUT" ]; then cp "$WORK/report.md" "$OUT"; cp "$res" "$OUT.csv"; cp "$WORK/auto.jsonl" "$OUT.jsonl" 2>/dev/null || true; fi
if [ "$RECORD" = 1 ]; then
  raw=("$res"); [ -f "$WORK/auto.jsonl" ] && raw+=("$WORK/auto.jsonl")
  record_run auto-bench "$WORK/report.md" "${raw[@]}"
fi

#!/usr/bin/env bash
# Issue 20: many small files. On a 2-host WAN lab, host 1 downloads from host 2: a tree of 300 x 1 MiB, a tree of
# 5,000 x 64 KiB and one file of each tree's total size, from `drsftp serve` and from globus-gridftp-server (both
# in host 2, same files), with drsftp's default (`drsftp copy -r`) and globus-url-copy -r, -r -pp, -r -pp -cc 4 and
# -r -pp -cc 16 (the best guc case counts), all in one run; the one-file rows are `drsftp copy` (default) of the
# same total size. Throughput = bytes on disk / wall time of the client process (login, listing, everything). A run
# is cut at SECS seconds (`timeout`), then the bytes it had written count. Runs are interleaved (every case once per
# round). Files live on /dev/shm (tmpfs: no disk in the way, fsync is free).
# Usage (root): bench/tree-bench.sh [--rtt 100ms] [--rate 200mbit] [--secs 120] [--reps 1] [--trees 1m,64k,300x64k]
#               [--servers drsftp,globus] [--cases drsftp,guc-r,guc-r-pp,guc-r-pp-cc4,guc-r-pp-cc16,one-file]
#               [--direction down|up|tp] [--iperf SECS] [--lab pip] [--out FILE] [--record]
# DRSFTP_BIN=path uses that binary (default: builds drsftp and drsftp-bench, uses target/release/drsftp).
# --direction up: host 1 uploads the trees into the servers (`drsftp copy -r DIR/ URL/`, guc `file://DIR/ URL/`);
# case drsftp-before runs DRSFTP_BEFORE_BIN the same way (an older build, for a before/after in one run).
# --direction tp: third-party, server to server: the source servers run on host 1, the destination servers on host
# 2 (`drsftp` = drsftp serve to drsftp serve, `globus` = globus-gridftp-server to globus-gridftp-server, both with
# third-party transfers allowed), and the client runs on host 1 with the source (its commands to the destination
# cross the WAN; the data goes source to destination over it). guc cases are guc third-party (`-r -cd -pp ...
# ftp://h1/... ftp://h2/...`).
# --servers drsftp-before: DRSFTP_BEFORE_BIN serves the same files (port 2813) and runs the drsftp and one-file
# cases against itself (guc cases are skipped there): a before/after of changes on either end, in one run.
# --iperf SECS: each rep first measures the lab's ceiling with iperf3 -R -P 1 and -P 4 (host 2 sends, SECS
# seconds each, memory to memory), rows with server iperf3.
# The lab and both servers are removed on exit, also on failure or Ctrl-C. --record writes a run folder
# bench/runs/<date>-<commit>-tree-bench/ (command.txt, machine.txt, results.csv, the report as README.md).
set -euo pipefail
RECORD_ARGV=("$0" "$@")
. "$(dirname "$0")/lib/record.sh"
IPERF=0 RTT=100ms RATE=200mbit SECS=120 REPS=1 TREES=1m,64k SERVERS=drsftp,globus LAB=pip OUT= RECORD=0 DIRECTION=down
CASES=drsftp,guc-r,guc-r-pp,guc-r-pp-cc4,guc-r-pp-cc16,one-file
while [ $# -gt 0 ]; do
  case "$1" in
    --record) RECORD=1; shift; continue ;;
    --rtt) RTT=$2 ;; --rate) RATE=$2 ;; --secs) SECS=$2 ;; --reps) REPS=$2 ;; --trees) TREES=$2 ;;
    --iperf) IPERF=$2 ;; --servers) SERVERS=$2 ;; --cases) CASES=$2 ;; --lab) LAB=$2 ;; --out) OUT=$2 ;;
    --direction) DIRECTION=$2 ;;
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
GSRV=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
WORK=/dev/shm/drsftp-tree-$LAB
cleanup() {
  for f in "$WORK/srv.pid" "$WORK/gsrv.pid" "$WORK/srv1.pid" "$WORK/gsrv1.pid" "$WORK/srvb.pid" "$WORK/iperf.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  "$BIN" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/root" "$WORK/out"
chmod 755 "$WORK" "$WORK/root"
# The trees and the one-file equivalents (pseudo-random, incompressible).
python3 - "$WORK/root" "$TREES" <<'PY'
import os, sys
root, trees = sys.argv[1], sys.argv[2].split(",")
spec = {"1m": (300, 1 << 20), "64k": (5000, 64 << 10), "300x64k": (300, 64 << 10)}
for t in trees:
    n, size = spec[t]
    d = os.path.join(root, f"tree{t}")
    for i in range(n):
        sub = os.path.join(d, f"d{i // 500:02d}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"f{i:05d}"), "wb") as f:
            f.write(os.urandom(size))
    with open(os.path.join(root, f"one{t}"), "wb") as f:
        for _ in range(n):
            f.write(os.urandom(size))
PY
chmod -R a+rX "$WORK/root"
"$BIN" lab up "$LAB" --rtt "$RTT" --rate "$RATE" --hosts 2 >"$WORK/lab.txt"
H1=198.18.0.1 H2=198.18.0.2
# Third-party: host 2 serves (and receives into) $WORK/dst, host 1 serves the trees.
ROOT2=$WORK/root
EXTRA2=
if [ "$DIRECTION" = tp ]; then
  ROOT2=$WORK/dst EXTRA2="--anonymous-write --third-party all"
  mkdir -p "$ROOT2"; chmod 777 "$ROOT2"
elif [ "$DIRECTION" = up ]; then
  EXTRA2=--anonymous-write
fi
# `lab exec` does not pass signals on: each server writes its own PID (sh's, then exec) for the cleanup.
"$BIN" lab exec "$LAB" h2 -- sh -c "echo \$\$ >$WORK/srv.pid; exec $BIN serve --listen $H2:2811 --anonymous \
  --root $ROOT2 $EXTRA2" >>"$WORK/serve.log" 2>&1 &
# globus-gridftp-server looks its address up by name, and a lab host has no resolver: a private /etc/hosts.
printf '127.0.0.1 localhost %s\n198.18.0.1 h1\n198.18.0.2 h2\n' "$(hostname)" >"$WORK/hosts"
"$BIN" lab exec "$LAB" h2 -- unshare -m sh -c "echo \$\$ >$WORK/gsrv.pid; mount --bind $WORK/hosts /etc/hosts && \
  exec $GSRV -aa -anonymous-user nobody -p 2812 -control-interface $H2 -data-interface $H2 -home-dir / \
  -l $WORK/gserve.log" </dev/null >/dev/null 2>&1 &
if [ "$DIRECTION" = tp ]; then
  "$BIN" lab exec "$LAB" h1 -- sh -c "echo \$\$ >$WORK/srv1.pid; exec $BIN serve --listen $H1:2811 --anonymous \
    --third-party all --root $WORK/root" >>"$WORK/serve1.log" 2>&1 &
  "$BIN" lab exec "$LAB" h1 -- unshare -m sh -c "echo \$\$ >$WORK/gsrv1.pid; mount --bind $WORK/hosts /etc/hosts && \
    exec $GSRV -aa -anonymous-user nobody -p 2812 -control-interface $H1 -data-interface $H1 -home-dir / \
    -l $WORK/gserve1.log" </dev/null >/dev/null 2>&1 &
fi
if [[ ",$SERVERS," == *,drsftp-before,* ]]; then
  [ -n "${DRSFTP_BEFORE_BIN:-}" ] || { echo "--servers drsftp-before needs DRSFTP_BEFORE_BIN"; exit 2; }
  "$BIN" lab exec "$LAB" h2 -- sh -c "echo \$\$ >$WORK/srvb.pid; exec $DRSFTP_BEFORE_BIN serve --listen $H2:2813 \
    --anonymous --root $WORK/root $([ "$DIRECTION" = up ] && echo --anonymous-write)" >>"$WORK/serve-before.log" 2>&1 &
fi
if [ "$IPERF" != 0 ]; then
  "$BIN" lab exec "$LAB" h2 -- sh -c "echo \$\$ >$WORK/iperf.pid; exec iperf3 -s" >/dev/null 2>&1 &
fi
for host in $H2 $([ "$DIRECTION" = tp ] && echo $H1); do
  for port in 2811 2812 $([ "$host" = "$H2" ] && [[ ",$SERVERS," == *,drsftp-before,* ]] && echo 2813); do
    for _ in $(seq 100); do
      "$BIN" lab exec "$LAB" h1 -- bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && break
      sleep 0.1
    done
  done
done
url() { # server tree-or-file -> URL
  case $1 in
    drsftp) echo "ftp://$H2:2811/$2" ;;
    drsftp-before) echo "ftp://$H2:2813/$2" ;;
    globus) echo "ftp://$H2:2812$WORK/root/$2" ;;
  esac
}
src_url() { # third-party source: server tree-or-file -> URL on host 1
  case $1 in
    drsftp) echo "ftp://$H1:2811/$2" ;;
    globus) echo "ftp://$H1:2812$WORK/root/$2" ;;
  esac
}
dst_url() { # third-party destination: server dir -> URL on host 2
  case $1 in
    drsftp) echo "ftp://$H2:2811/$2" ;;
    globus) echo "ftp://$H2:2812$WORK/dst/$2" ;;
  esac
}
total() { case $1 in 1m) echo $((300 << 20)) ;; 64k) echo $((5000 << 16)) ;; 300x64k) echo $((300 << 16)) ;; esac; }
cases=()
for t in ${TREES//,/ }; do
  for s in ${SERVERS//,/ }; do
    for c in ${CASES//,/ }; do
      # The before server runs only drsftp's own cases, with the before client.
      [ "$s" = drsftp-before ] && [ "$c" != drsftp ] && [ "$c" != one-file ] && continue
      cases+=("$t:$s:$c")
    done
  done
done
res="$WORK/results.csv"
echo "rep,tree,server,case,seconds,bytes,mbps,files,load1" >"$res"
one() { # tree:server:case -> appends a CSV line
  local t=${1%%:*} rest=${1#*:} s c d t0 t1 bytes files want
  s=${rest%%:*} c=${rest#*:} d="$WORK/out/run"
  want=$(total "$t")
  local BIN=$BIN
  [ "$s" = drsftp-before ] && BIN=$DRSFTP_BEFORE_BIN
  if [ "$DIRECTION" = tp ]; then
    d="$WORK/dst/run"
    rm -rf "$d"; mkdir -p "$d"; chmod 777 "$d"
    local from to; from=$(src_url $s tree$t) to=$(dst_url $s run)
    t0=$(date +%s.%N)
    case $c in
      drsftp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -r -q "$from/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      drsftp-before) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$DRSFTP_BEFORE_BIN" copy -r -q "$from/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      one-file) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -q "$(src_url $s one$t)" "$to/one" >/dev/null 2>"$WORK/err" || true ;;
      guc-r) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd "$from/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      guc-r-pp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp "$from/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      guc-r-pp-cc*) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp -cc "${c#guc-r-pp-cc}" "$from/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
    esac
  elif [ "$DIRECTION" = up ]; then
    # Into the served tree; globus-gridftp-server writes as nobody.
    d="$WORK/root/up-run"
    rm -rf "$d"; mkdir -p "$d"; chmod 777 "$d"
    local to; to=$(url $s up-run)
    t0=$(date +%s.%N)
    case $c in
      drsftp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -r -q "$WORK/root/tree$t/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      drsftp-before) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$DRSFTP_BEFORE_BIN" copy -r -q "$WORK/root/tree$t/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      one-file) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -q "$WORK/root/one$t" "$to/one" >/dev/null 2>"$WORK/err" || true ;;
      guc-r) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd "file://$WORK/root/tree$t/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      guc-r-pp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp "file://$WORK/root/tree$t/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
      guc-r-pp-cc*) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp -cc "${c#guc-r-pp-cc}" "file://$WORK/root/tree$t/" "$to/" >/dev/null 2>"$WORK/err" || true ;;
    esac
  else
  rm -rf "$d"; mkdir -p "$d"
  t0=$(date +%s.%N)
  case $c in
    drsftp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -r -q "$(url $s tree$t)" "$d" >/dev/null 2>"$WORK/err" || true ;;
    one-file) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" "$BIN" copy -q "$(url $s one$t)" "$d/one" >/dev/null 2>"$WORK/err" || true ;;
    guc-r) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd "$(url $s tree$t)/" "file://$d/" >/dev/null 2>"$WORK/err" || true ;;
    guc-r-pp) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp "$(url $s tree$t)/" "file://$d/" >/dev/null 2>"$WORK/err" || true ;;
    guc-r-pp-cc*) "$BIN" lab exec "$LAB" h1 -- timeout "$SECS" globus-url-copy -r -cd -pp -cc "${c#guc-r-pp-cc}" "$(url $s tree$t)/" "file://$d/" >/dev/null 2>"$WORK/err" || true ;;
  esac
  fi
  t1=$(date +%s.%N)
  bytes=$(du -s --block-size=1 "$d" | cut -f1)
  # Directory blocks are not payload: count at most what the tree holds.
  [ "$bytes" -gt "$want" ] && bytes=$want
  files=$(find "$d" -type f ! -name '.*drsftp-part*' | wc -l)
  local secs mbps
  secs=$(echo "$t1 - $t0" | bc -l)
  mbps=$(echo "$bytes * 8 / $secs / 1000000" | bc -l)
  printf "%s,%s,%s,%s,%.2f,%s,%.1f,%s,%s\n" "$REP" "$t" "$s" "$c" "$secs" "$bytes" "$mbps" "$files" \
    "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$res" >&2
  [ -s "$WORK/err" ] && head -c 300 "$WORK/err" | sed 's/^/    /' >&2 || true
}
iperf() { # -P N -> appends a CSV line (tree -, server iperf3)
  "$BIN" lab exec "$LAB" h1 -- iperf3 -c $H2 -R -P "$1" -t "$IPERF" -J >"$WORK/iperf.json" 2>&1 || true
  python3 - "$WORK/iperf.json" "$REP" "$1" "$IPERF" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY' | tee -a "$res" >&2
import json, sys
f, rep, p, secs, load = sys.argv[1:]
try:
    e = json.load(open(f))["end"]["sum_received"]
    print(f"{rep},-,iperf3,P{p},{e['seconds']:.2f},{e['bytes']},{e['bits_per_second'] / 1e6:.1f},0,{load}")
except Exception as x:
    print(f"{rep},-,iperf3,P{p},{secs},0,0.0,0,{load}")
PY
}
for REP in $(seq 1 "$REPS"); do
  if [ "$IPERF" != 0 ]; then iperf 1; iperf 4; fi
  n=${#cases[@]}
  for i in $(seq 0 $((n - 1))); do one "${cases[$(( (i + REP - 1) % n ))]}"; done
done
report() {
  echo "# Trees ($DIRECTION): RTT $RTT, rate $RATE, cap ${SECS} s, $REPS rep(s), files on tmpfs"
  echo "# $(head -c 300 "$WORK/lab.txt" | tr '\n' ' ')"
  echo "# load average at end: $(cat /proc/loadavg)"
  python3 - "$res" <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))
groups = []
for r in rows:
    k = (r["tree"], r["server"])
    if k not in groups: groups.append(k)
print("| tree | server | case | median Mbit/s | runs (Mbit/s) | files on disk | load1 |")
print("|---|---|---|---|---|---|---|")
summary = []
for t, s in groups:
    rs = [r for r in rows if (r["tree"], r["server"]) == (t, s)]
    cases = []
    for r in rs:
        if r["case"] not in cases: cases.append(r["case"])
    med = {c: st.median(float(r["mbps"]) for r in rs if r["case"] == c) for c in cases}
    for c in cases:
        cr = [r for r in rs if r["case"] == c]
        print(f'| {t} | {s} | {c} | {med[c]:.1f} | {", ".join(r["mbps"] for r in cr)} | {", ".join(r["files"] for r in cr)} | {", ".join(r["load1"] for r in cr)} |')
    g = {c: v for c, v in med.items() if c.startswith("guc")}
    if g and "drsftp" in med:
        best = max(g, key=g.get)
        line = f"{t} tree from {s}: drsftp {med['drsftp']:.1f} Mbit/s; best guc {best} {g[best]:.1f}; drsftp / best guc = {med['drsftp'] / g[best]:.2f}x"
        if "one-file" in med and med["one-file"] > 0:
            line += f"; one file {med['one-file']:.1f}; tree / one file = {med['drsftp'] / med['one-file']:.2f}x"
        target = "(targets: >= 1.1x guc and >= 0.9x one file)" if t == "1m" else "(target: >= 1.5x guc)"
        if "drsftp-before" in med and med["drsftp-before"] > 0:
            line += f"; drsftp before {med['drsftp-before']:.1f}, after / before = {med['drsftp'] / med['drsftp-before']:.2f}x"
        summary.append(line + " " + target)
meds = {}
for r in rows:
    meds.setdefault((r["tree"], r["server"], r["case"]), []).append(float(r["mbps"]))
for (t, s, c), v in meds.items():
    b = meds.get((t, "drsftp-before", c))
    if s == "drsftp" and b:
        summary.append(f"{t} {c} from drsftp serve: after {st.median(v):.1f} Mbit/s, before (DRSFTP_BEFORE_BIN at both ends) {st.median(b):.1f}: after / before = {st.median(v) / st.median(b):.3f}x")
print()
for l in summary: print("- " + l)
PY
}
report | tee "$WORK/report.md"
if [ -n "$OUT" ]; then cp "$WORK/report.md" "$OUT"; cp "$res" "$OUT.csv"; fi
if [ "$RECORD" = 1 ]; then
  record_run tree-bench "$WORK/report.md" "$res"
fi

#!/usr/bin/env bash
# Issue 2 benchmark: download a 2 GiB file on loopback with 4 MODE E streams.
#   A  = drsftp copy              from drsftp serve
#   Av = drsftp copy --no-verify  from drsftp serve
#   B  = globus-url-copy          from drsftp serve
#   C  = globus-url-copy          from globus-gridftp-server   (the baseline)
#   D  = drsftp copy              from globus-gridftp-server
#   Dv = drsftp copy --no-verify  from globus-gridftp-server
# Comparable work: globus-url-copy does not verify anything, while `drsftp copy` by default also runs CKSM on the
# server while hashing its own copy (SHA-256 of 2 GiB on each side) and fsyncs before the rename. The --no-verify
# columns (Av, Dv) do the same work as globus-url-copy (transfer + size check; fsync on tmpfs is a no-op) and are the
# like-for-like comparison; A and D show what the default end-to-end verification costs.
# Runs are interleaved (one of each per round, the order rotated every round) so machine noise hits all alike; the
# median wall time of each (process start to exit, login included) is reported with the ratio to C measured in the
# same run (>1 = faster than C). Files live in /dev/shm so the disk is not measured. Every output is compared
# byte for byte with the source after its timed run (not timed). CPU seconds per case (the client's user+sys, plus
# what both servers used meanwhile, Globus's reaped per-session children included) are printed too: on a shared
# machine they are much less distorted by other jobs than wall times. Results and discussion: docs/bench/loopback.md
# Usage: bench/loopback-2g.sh [--record] [SIZE_MIB] [ROUNDS]   (or SIZE_MIB=... ROUNDS=... in the environment;
#        defaults 2048 and 3; DRSFTP_BIN=path uses that binary instead of building drsftp and drsftp-bench and
#        using target/release/drsftp). --record also writes a run folder bench/runs/<date>-<commit>-loopback-2g/
#        (command.txt, machine.txt, results.csv with every run's wall and CPU seconds, the report as README.md).
set -euo pipefail
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
RECORD=0
if [ "${1:-}" = --record ]; then RECORD=1; shift; fi
SIZE_MIB=${1:-${SIZE_MIB:-2048}}
ROUNDS=${2:-${ROUNDS:-3}}
if [ -n "${DRSFTP_BIN:-}" ]; then
  BIN=$DRSFTP_BIN
else
  bench_build
  BIN=$BENCH_TARGET/release/drsftp
fi
command -v globus-url-copy >/dev/null || { echo "needs globus-url-copy (run scripts/setup.sh)"; exit 1; }
command -v globus-gridftp-server >/dev/null || { echo "needs globus-gridftp-server (run scripts/setup.sh)"; exit 1; }
[ -d /dev/shm ] || { echo "needs /dev/shm"; exit 1; }

work=$(mktemp -d /dev/shm/drsftp-bench.XXXXXX)
chmod 0777 "$work"
pids=()
cleanup() {
  # Only the servers this script started, by PID.
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/root" && chmod 0777 "$work/root"
head -c $((SIZE_MIB * 1048576)) /dev/urandom > "$work/root/big"
chmod 0644 "$work/root/big"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(freeport); P2=$(freeport)
"$BIN" serve --listen 127.0.0.1:$P1 --root "$work/root" --anonymous >"$work/drsftp-serve.log" 2>&1 &
pids+=($!)
globus-gridftp-server -aa -anonymous-user nobody -p $P2 -control-interface 127.0.0.1 -data-interface 127.0.0.1 \
  -home-dir / -l "$work/gftp.log" >/dev/null 2>&1 &
pids+=($!)
for port in $P1 $P2; do
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.1
  done
done

tck=$(getconf CLK_TCK)
srvcpu() { # CPU seconds used so far by both servers, their reaped children (Globus forks one per session) included
  local sum=0 p
  for p in "${pids[@]}"; do
    sum=$(echo "$sum + $(cut -d' ' -f14-17 "/proc/$p/stat" | tr ' ' '+')" | bc)
  done
  echo "$sum"
}
run() { # name cmd... ; prints wall seconds; records client+server CPU seconds; checks the output (not timed)
  local name=$1; shift
  local out="$work/out.$name"
  rm -f "$out"
  local s0 s1
  s0=$(srvcpu)
  local TIMEFORMAT="%3R %3U %3S"
  { time "$@" >/dev/null 2>"$work/err"; } 2>"$work/time" || {
    echo "FAILED: $*" >&2; cat "$work/err" >&2; return 1; }
  sleep 0.3 # let globus-gridftp-server reap its session child, so its CPU is counted
  s1=$(srvcpu)
  cmp -s "$out" "$work/root/big" || { echo "CONTENT MISMATCH: $*" >&2; return 1; }
  rm -f "$out"
  read -r wall user sys <"$work/time"
  echo "$user + $sys" | bc >>"$work/cpu-client.$name"
  echo "($s1 - $s0) / $tck" | bc -l >>"$work/cpu-server.$name"
  echo "$wall"
}
case_cmd() { # name -> runs that case once
  case $1 in
    A)  run A  "$BIN" copy -p 4 ftp://127.0.0.1:$P1/big "$work/out.A";;
    Av) run Av "$BIN" copy -p 4 --no-verify ftp://127.0.0.1:$P1/big "$work/out.Av";;
    B)  run B  globus-url-copy -p 4 ftp://127.0.0.1:$P1/big "file://$work/out.B";;
    C)  run C  globus-url-copy -p 4 ftp://127.0.0.1:$P2$work/root/big "file://$work/out.C";;
    D)  run D  "$BIN" copy -p 4 ftp://127.0.0.1:$P2$work/root/big "$work/out.D";;
    Dv) run Dv "$BIN" copy -p 4 --no-verify ftp://127.0.0.1:$P2$work/root/big "$work/out.Dv";;
  esac
}
cases=(A Av B C D Dv)
declare -A T
loads=""
for r in $(seq 1 "$ROUNDS"); do
  n=${#cases[@]}
  for i in $(seq 0 $((n - 1))); do
    k=${cases[$(( (i + r - 1) % n ))]}
    T[$k]+="$(case_cmd "$k") "
  done
  loads+="$(cut -d' ' -f1 /proc/loadavg) "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
report() {
  bytes=$((SIZE_MIB * 1048576))
  printf "loopback download, %d MiB, 4 streams (MODE E), %d rounds, median wall time (process start to exit, login included)\n" \
    "$SIZE_MIB" "$ROUNDS"
  printf "%-52s %8s %10s %8s\n" "case" "seconds" "MB/s" "vs C"
  mc=$(echo "${T[C]}" | median)
  for k in "${cases[@]}"; do
    m=$(echo "${T[$k]}" | median)
    case $k in
      A)  name="A  drsftp copy <- drsftp serve";;
      Av) name="Av drsftp copy --no-verify <- drsftp serve";;
      B)  name="B  globus-url-copy <- drsftp serve";;
      C)  name="C  globus-url-copy <- globus-gridftp-server";;
      D)  name="D  drsftp copy <- globus-gridftp-server";;
      Dv) name="Dv drsftp copy --no-verify <- globus-gridftp-server";;
    esac
    printf "%-52s %8.3f %10.1f %7.2fx\n" "$name" "$m" "$(echo "$bytes / $m / 1000000" | bc -l)" "$(echo "$mc / $m" | bc -l)"
  done
  echo "raw wall seconds:"
  for k in "${cases[@]}"; do printf "  %-3s [%s]\n" "$k" "${T[$k]% }"; done
  echo "CPU seconds per run, median (user+sys; contention-proof: what each case costs the machine):"
  printf "  %-3s %8s %8s %8s\n" "" "client" "server" "total"
  for k in "${cases[@]}"; do
    c=$(median <"$work/cpu-client.$k"); s=$(median <"$work/cpu-server.$k")
    printf "  %-3s %8.2f %8.2f %8.2f\n" "$k" "$c" "$s" "$(echo "$c + $s" | bc)"
  done
  echo "1-min load average after each round: [${loads% }] ($(nproc) CPUs; other jobs on the machine raise it)"
}
report | tee "$work/report.txt"
if [ "$RECORD" = 1 ]; then
  echo "round,case,wall_seconds,client_cpu_seconds,server_cpu_seconds" >"$work/results.csv"
  for k in "${cases[@]}"; do
    read -r -a walls <<<"${T[$k]}"
    mapfile -t cc <"$work/cpu-client.$k"
    mapfile -t sc <"$work/cpu-server.$k"
    for i in "${!walls[@]}"; do
      echo "$((i + 1)),$k,${walls[$i]},${cc[$i]},${sc[$i]}" >>"$work/results.csv"
    done
  done
  record_run loopback-2g "$work/report.txt" "$work/results.csv"
fi

#!/usr/bin/env bash
# Issue 2 benchmark: download a 2 GiB file on loopback with 4 MODE E streams.
#   A = drsftp copy        from drsftp serve
#   B = globus-url-copy    from drsftp serve
#   C = globus-url-copy    from globus-gridftp-server   (the baseline)
#   D = drsftp copy        from globus-gridftp-server
# Runs are interleaved (A B C D, repeated ROUNDS times) so machine noise hits all alike; the median wall time of
# each is reported with the ratio to C measured in the same run. Files live in /dev/shm so the disk is not measured.
# Usage: bench/loopback-2g.sh [SIZE_MIB=2048] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-2048}
ROUNDS=${2:-3}
BIN=${DRSFTP_BIN:-$PWD/target/release/drsftp}
[ -x "$BIN" ] || cargo build --release -q -p drsftp
command -v globus-url-copy >/dev/null || { echo "needs globus-url-copy (run scripts/setup.sh)"; exit 1; }
command -v globus-gridftp-server >/dev/null || { echo "needs globus-gridftp-server (run scripts/setup.sh)"; exit 1; }

work=$(mktemp -d /dev/shm/drsftp-bench.XXXXXX)
chmod 0777 "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
mkdir -p "$work/root" && chmod 0777 "$work/root"
head -c $((SIZE_MIB * 1048576)) /dev/urandom > "$work/root/big"
chmod 0644 "$work/root/big"
want=$(sha256sum "$work/root/big" | cut -d' ' -f1)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(freeport); P2=$(freeport)
"$BIN" serve --listen 127.0.0.1:$P1 --root "$work/root" --anonymous >"$work/drsftp-serve.log" 2>&1 &
pids+=($!)
globus-gridftp-server -aa -anonymous-user nobody -p $P2 -control-interface 127.0.0.1 -data-interface 127.0.0.1 \
  -home-dir / -l "$work/gftp.log" >/dev/null 2>&1 &
pids+=($!)
sleep 1

run() { # name cmd... ; prints seconds, checks the hash
  local out="$work/out.$1"; shift
  rm -f "$out"
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/err" || { echo "FAILED: $*" >&2; cat "$work/err" >&2; return 1; }
  t1=$(date +%s.%N)
  local got; got=$(sha256sum "$out" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "HASH MISMATCH: $*" >&2; return 1; }
  rm -f "$out"
  echo "$t1 - $t0" | bc -l
}
declare -A T
for r in $(seq 1 "$ROUNDS"); do
  T[A]+="$(run A "$BIN" copy -p 4 ftp://127.0.0.1:$P1/big "$work/out.A") "
  T[B]+="$(run B globus-url-copy -p 4 ftp://127.0.0.1:$P1/big "file://$work/out.B") "
  T[C]+="$(run C globus-url-copy -p 4 ftp://127.0.0.1:$P2$work/root/big "file://$work/out.C") "
  T[D]+="$(run D "$BIN" copy -p 4 ftp://127.0.0.1:$P2$work/root/big "$work/out.D") "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bytes=$((SIZE_MIB * 1048576))
printf "loopback download, %d MiB, 4 streams, %d rounds, median wall time (includes login)\n" "$SIZE_MIB" "$ROUNDS"
printf "%-48s %8s %10s %8s\n" "case" "seconds" "MB/s" "vs C"
mc=$(echo "${T[C]}" | median)
for k in A B C D; do
  m=$(echo "${T[$k]}" | median)
  case $k in
    A) name="A drsftp copy <- drsftp serve";;
    B) name="B globus-url-copy <- drsftp serve";;
    C) name="C globus-url-copy <- globus-gridftp-server";;
    D) name="D drsftp copy <- globus-gridftp-server";;
  esac
  printf "%-48s %8.3f %10.1f %7.2fx\n" "$name" "$m" "$(echo "$bytes / $m / 1000000" | bc -l)" "$(echo "$mc / $m" | bc -l)"
done
echo "raw seconds: A=[${T[A]}] B=[${T[B]}] C=[${T[C]}] D=[${T[D]}]"

#!/usr/bin/env bash
# Server memory over many logins and copies (docs/bench/loopback.md, "Server memory"): one `drsftp serve` with a
# password user, COUNT verified `drsftp copy -p STREAMS` of a SIZE_MIB file on /dev/shm one after another; prints
# the server's VmRSS (KiB, sampled every 20 ms) peak and mean during each copy and after it. A bounded server
# returns to the same RSS after every copy.
# Usage: bench/serve-rss.sh [STREAMS] [COUNT] [SIZE_MIB]   (defaults 4, 10, 256; DRSFTP_BIN=path uses that binary
#        instead of building)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/record.sh
STREAMS=${1:-4}
COUNT=${2:-10}
SIZE_MIB=${3:-256}
if [ -n "${DRSFTP_BIN:-}" ]; then
  BIN=$DRSFTP_BIN
else
  bench_build
  BIN=$BENCH_TARGET/release/drsftp
fi
work=$(mktemp -d /dev/shm/drsftp-serve-rss.XXXXXX)
spid=
cleanup() {
  [ -n "$spid" ] && { kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/root"
head -c $((SIZE_MIB * 1048576)) /dev/urandom >"$work/root/f"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve --listen 127.0.0.1:$port --root "$work/root" --user bench:bench-pw >/dev/null 2>&1 &
spid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/{print $2}' "/proc/$spid/status"; }
export DRSFTP_PASSWORD=bench-pw
echo "server RSS KiB at start: $(rss)"
for i in $(seq "$COUNT"); do
  "$BIN" copy -q -p "$STREAMS" "ftp://bench@127.0.0.1:$port/f" "$work/out" &
  c=$!
  peak=0 sum=0 n=0
  while kill -0 $c 2>/dev/null; do
    r=$(rss); [ "$r" -gt $peak ] && peak=$r; sum=$((sum + r)); n=$((n + 1)); sleep 0.02
  done
  wait $c
  cmp -s "$work/out" "$work/root/f" || { echo "copy $i differs from the source"; exit 1; }
  rm -f "$work/out"
  printf "copy %2d: peak %7d  mean %7d  after %7d\n" "$i" "$peak" $((sum / (n > 0 ? n : 1))) "$(rss)"
done

#!/usr/bin/env bash
# Two simultaneous default `drsftp copy` downloads on a clean 500 Mbit/s · 100 ms lab (issue 22, fairness), with the
# sending server's sockets (`ss -tin` in h1) every 0.1 s for the first 4 s and at ~8 and ~12 s, and each copy's
# --trace and --json. Shows which copy's streams leave slow start when (ssthresh), which are receive-window-limited
# (rwnd_limited) and their cwnds (docs/bench/auto-transport.md, "Why the copies start unevenly").
# Usage (root): OUT=DIR [CC=cubic] [DRSFTP_BIN=...] [LAB_PREFIX=fairss] bench/fair-ss.sh
# Writes DIR/ss.txt (raw), DIR/ss-summary.txt (per snapshot and copy: cwnd/ssthresh per stream, '-' while in slow
# start; RTT; delivered segments; rwnd_limited %), DIR/trace-{a,b}.csv, DIR/json-{a,b}.
set -u
cd "$(dirname "$0")/.."
D=${DRSFTP_BIN:-$PWD/target/release/drsftp}
LAB=${LAB_PREFIX:-fairss}$(( $$ % 10000 ))
OUT=${OUT:-/tmp/fair-ss}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fair-ss.XXXXXX); chmod 755 "$W"; mkdir -p "$W/root" "$W/out" "$W/cfg"
trap '"$D" lab down "$LAB" >/dev/null 2>&1; rm -rf "$W"' EXIT INT TERM
"$D" lab up "$LAB" --hosts 2 --rtt 100ms --rate 500mbit --tcp-rmem "4096 131072 268435456" \
    --tcp-wmem "4096 65536 268435456" >/dev/null
head -c 1G /dev/urandom >"$W/root/f"
"$D" lab exec "$LAB" h1 -- "$D" serve --root "$W/root" --anonymous --listen 198.18.0.1:2811 \
    --congestion "${CC:-cubic}" --log warn >"$OUT/serve.log" 2>&1 &
spid=$!
sleep 1
: >"$OUT/ss.txt"
t0=$(date +%s.%N)
pids=()
for k in a b; do
    XDG_CONFIG_HOME=$W/cfg "$D" lab exec "$LAB" h2 -- "$D" copy --json --quiet --no-resume --trace "$OUT/trace-$k.csv" \
        ftp://198.18.0.1:2811/f "$W/out/$k" >"$OUT/json-$k" 2>&1 &
    pids+=($!)
done
snap() {
    echo "== t=$(echo "$(date +%s.%N) - $t0" | bc)" >>"$OUT/ss.txt"
    "$D" lab exec "$LAB" h1 -- ss -tin state established dst 198.18.0.2 >>"$OUT/ss.txt" 2>&1
}
for _ in $(seq 1 40); do snap; sleep 0.1; done
sleep 4; snap; sleep 4; snap
wait "${pids[@]}"
kill "$spid" 2>/dev/null; wait
python3 - "$OUT/ss.txt" >"$OUT/ss-summary.txt" <<'PY'
import re, sys
rows, cur, conn = [], None, None
for line in open(sys.argv[1]):
    if line.startswith("== t="):
        cur = float(line.split("t=")[1]); continue
    m = re.match(r"\s*\d+\s+\d+\s+198\.18\.0\.1:(\d+)\s+198\.18\.0\.2:(\d+)", line)
    if m:
        conn = (int(m.group(1)), int(m.group(2))); continue
    if conn and "cwnd:" in line and "bytes_sent" in line:
        if conn[0] != 2811:  # data sockets only; a copy is the client port its streams connect to
            g = lambda k: (re.search(r"(?:^|\s)" + k + r":([\d.]+)", line) or [None, None])[1]
            rl = (re.search(r"rwnd_limited:\d+ms\(([\d.]+)%\)", line) or [None, "0"])[1]
            rows.append((cur, conn[1], conn[0], int(g("cwnd")), g("ssthresh"), float(g("rtt")), int(g("delivered") or 0), rl))
        conn = None
by_t = {}
for r in rows:
    by_t.setdefault(r[0], []).append(r)
for t in sorted(by_t):
    g = {}
    for r in by_t[t]:
        g.setdefault(r[1], []).append(r)
    parts = []
    for peer in sorted(g):
        xs = sorted(g[peer], key=lambda r: r[2])
        parts.append(f"{peer}: " + " ".join(f"{r[3]}/{r[4] or '-'}" for r in xs)
                     + f" rtt {xs[0][5]:.0f} dlv {sum(r[6] for r in xs)} rl {','.join(r[7] for r in xs)}")
    print(f"{t:6.2f}  " + " | ".join(parts))
PY
echo "$OUT/ss-summary.txt"

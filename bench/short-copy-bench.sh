#!/usr/bin/env bash
# Short copies on a long path, binary A against binary B in one run (issue 22, "fast short transfers"): where a
# small file's time is all control round trips, what one client's pipelining saves is visible directly.
#
#   bench/short-copy-bench.sh --a OLD_DRSFTP --b NEW_DRSFTP [--rtt 200ms] [--rate 200mbit] [--size 1M] [--reps 7]
#                             [--tls] [--upload] [--record]
#
# Root: a 2-host lab `short<pid>` (torn down on exit), `drsftp serve` (binary B) on h1 with a 1 MiB file, and on
# h2 one `drsftp copy --json` per binary per repetition, A and B alternating so drift hits both alike. Each copy
# is timed end to end (process start to exit, as a user sees it) and its `--json` phases are kept. --tls gives
# the server a throw-away self-signed certificate and the clients --tls require pinned to its fingerprint.
# --upload copies the file from h2 to the server instead (anonymous write on). Prints medians and B / A.
set -eu
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
A="" B="" RTT=200ms RATE=200mbit SIZE=1M REPS=7 TLS=0 UPLOAD=0 RECORD=0 OUT=/tmp/short-copy-bench
while [ $# -gt 0 ]; do
    case "$1" in
        --a) A=$(realpath "$2"); shift 2 ;;
        --b) B=$(realpath "$2"); shift 2 ;;
        --rtt) RTT=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --size) SIZE=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --tls) TLS=1; shift ;;
        --upload) UPLOAD=1; shift ;;
        --out) OUT=$2; shift 2 ;;
        --record) RECORD=1; shift ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$A" ] && [ -n "$B" ] || { echo "--a and --b are required" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root (network namespaces)" >&2; exit 0; }
LAB=short$(( $$ % 10000 ))
WORK=$(mktemp -d /tmp/short-copy-bench.XXXXXX)
chmod 755 "$WORK"
SERVER=""
cleanup() {
    [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true
    "$B" lab down "$LAB" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$OUT" "$WORK/root" "$WORK/out"
CSV=$OUT/runs.csv
echo "binary,rep,seconds,login_s,prepare_s,verify_s,bytes" >"$CSV"
: >"$OUT/copies.jsonl"
head -c "$SIZE" /dev/urandom >"$WORK/root/f"
"$B" lab up "$LAB" --hosts 2 --rtt "$RTT" --rate "$RATE" >/dev/null
serve=("$B" serve --root "$WORK/root" --anonymous --listen 198.18.0.1:2811 --log warn)
[ "$UPLOAD" = 1 ] && serve+=(--anonymous-write)
client=(--quiet --no-resume)
if [ "$TLS" = 1 ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=198.18.0.1 \
        -addext subjectAltName=IP:198.18.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
    serve+=(--tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")
    fp=$(openssl x509 -in "$WORK/cert.pem" -noout -fingerprint -sha256 | cut -d= -f2)
    client+=(--tls require --tls-fingerprint "$fp")
fi
"$B" lab exec "$LAB" h1 -- "${serve[@]}" >"$WORK/serve.log" 2>&1 &
SERVER=$!
sleep 1
for rep in $(seq 1 "$REPS"); do
    for which in A B; do
        bin=$A; [ "$which" = B ] && bin=$B
        rm -f "$WORK/out/f"
        src=ftp://198.18.0.1:2811/f dst=$WORK/out/f
        [ "$UPLOAD" = 1 ] && src=$WORK/root/f dst=ftp://198.18.0.1:2811/up-$which-$rep
        t0=$(date +%s.%N)
        j=$("$B" lab exec "$LAB" h2 -- "$bin" copy --json "${client[@]}" "$src" "$dst") || {
            echo "copy with $which failed" >&2; cat "$WORK/serve.log" >&2; exit 1; }
        t1=$(date +%s.%N)
        echo "$j" >>"$OUT/copies.jsonl"
        row=$(echo "$j" | python3 -c '
import json,sys
j=json.load(sys.stdin); p=j.get("phases") or {}
print(",".join(str(p.get(k,"")) for k in ("login","prepare","verify"))+","+str(j.get("bytes","")))')
        echo "$which,$rep,$(echo "$t1 - $t0" | bc -l),$row" >>"$CSV"
        tail -1 "$CSV"
    done
done
REPORT=$OUT/README.md
python3 - "$CSV" "$RTT" "$RATE" "$SIZE" "$TLS" "$UPLOAD" >"$REPORT" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rtt, rate, size, tls, up = sys.argv[2:7]
def med(b, k):
    v = [float(r[k]) for r in rows if r["binary"] == b and r[k] not in ("", "None")]
    return statistics.median(v) if v else float("nan")
print(f"# Short {'uploads' if up == '1' else 'copies'}, A vs B: {size} at {rate} · {rtt}{' over TLS (--tls require)' if tls == '1' else ''}\n")
print(f"{len(rows)//2} repetitions each, A and B alternating; medians in seconds (wall: process start to exit).\n")
print("| | wall | login | prepare | verify |")
print("|---|---|---|---|---|")
for b in "AB":
    print(f"| {b} | {med(b,'seconds'):.3f} | {med(b,'login_s'):.3f} | {med(b,'prepare_s'):.3f} | {med(b,'verify_s'):.3f} |")
print(f"| B / A | {med('B','seconds')/med('A','seconds'):.3f} | {med('B','login_s')/med('A','login_s'):.3f} | | |")
EOF
cat "$REPORT"
if [ "$RECORD" = 1 ]; then
    record_run short-copy-bench "$REPORT" "$CSV" "$OUT/copies.jsonl"
fi

#!/usr/bin/env bash
# --transport auto on the WAN lab (issue 22; report in docs/bench/auto-transport.md). Needs root, /dev/net/tun, and
# globus-url-copy for the guc variant.
# Usage: bench/transport-bench.sh [--cases "500mbit,100ms,0.1%,1G 500mbit,100ms,1%,1G"] [--cc cubic,bbr]
#                                 [--variants auto,autoprof,tcp,udp,guc] [--reps 3] [--out DIR] [--record]
# Per case (rate,rtt,loss,size; loss 0 for none) and sending-server congestion control: a 2-host lab named
# auto<pid>, `drsftp serve --congestion CC` on h1, and on h2 one download per variant and repetition: `auto` is
# `drsftp copy` with no transport flag and no path profile, `autoprof` the same with a path profile holding the
# lab's rate, RTT and loss (what calibration would store; a lossy one starts on blast), `tcp`/`udp` force
# `--transport`, `guc` is globus-url-copy's best of `-p 16 -tcp-bs 4M` and `-p 64 -tcp-bs 1M`. Writes DIR/runs.csv (one row per copy, with the auto choice, its reason
# and the blast set-up time and the copy's phases), DIR/copies.jsonl (each copy's whole --json, raw) and DIR/report.md (median Mbit/s per variant, share of the link, auto against the
# better forced transport and against guc's best, the load average). The issue's full matrix is
#   --cases "500mbit,100ms,0,1G 500mbit,100ms,0.1%,1G 500mbit,100ms,1%,1G" --cc cubic,bbr --reps 3
# and the short-transfer case "200mbit,200ms,5%,128M". Every lab is torn down on exit, also on failure. A copy that
# takes longer than COPY_TIMEOUT seconds (default 600) is recorded with 0 Mbit/s. DRSFTP_BIN overrides the binary,
# SKIP_BUILD=1 skips the build (never build inside the quiet lock), LAB_PREFIX the lab's name prefix (default auto).
set -eu
RECORD_ARGV=("$0" "$@")
cd "$(dirname "$0")/.."
. bench/lib/record.sh
CASES="200mbit,200ms,5%,128M 500mbit,100ms,0.1%,1G 500mbit,100ms,1%,1G"
CCS=cubic,bbr
VARIANTS=auto,tcp,udp,guc
REPS=3
OUT=/tmp/transport-bench
RECORD=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) CASES=$2; shift 2 ;;
        --cc) CCS=$2; shift 2 ;;
        --variants) VARIANTS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --record) RECORD=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "${SKIP_BUILD:-}" ] || bench_build
DRSFTP=${DRSFTP_BIN:-$BENCH_TARGET/release/drsftp}
COPY_TIMEOUT=${COPY_TIMEOUT:-600}
LAB=${LAB_PREFIX:-auto}$(( $$ % 10000 ))
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/transport-bench.XXXXXX)
chmod 755 "$WORK"
cleanup() { "$DRSFTP" lab down "$LAB" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
CSV=$OUT/runs.csv
JSONL=$OUT/copies.jsonl
PHASES="login prepare setup first_datagram ramp first_pass tail eod verify"
echo "case,cc,variant,rep,bytes,seconds,mbps,chosen,reason,setup_seconds,load1,${PHASES// /_s,}_s,final_rate_mbps" >"$CSV"
: >"$JSONL"

one() { # case cc variant rep url dst -> appends a row
    local c=$1 cc=$2 v=$3 rep=$4 url=$5 dst=$6 j="" t0 t1 secs=0 bytes=0
    rm -f "$dst"
    load=$(cut -d' ' -f1 /proc/loadavg)
    case "$v" in
        guc)
            local best=0 bsecs=0 p
            for p in "16 4M" "64 1M"; do
                set -- $p
                rm -f "$dst"
                t0=$(date +%s.%N)
                timeout "$COPY_TIMEOUT" "$DRSFTP" lab exec "$LAB" h2 -- globus-url-copy -p "$1" -tcp-bs "$2" "$url" "file://$dst" >/dev/null 2>&1 || continue
                t1=$(date +%s.%N)
                secs=$(echo "$t1 - $t0" | bc -l)
                bytes=$(stat -c %s "$dst")
                if [ "$(echo "$bytes * 8 / $secs > $best" | bc -l)" = 1 ]; then best=$(echo "$bytes * 8 / $secs" | bc -l); bsecs=$secs; fi
            done
            echo "${c//,/ },$cc,guc,$rep,$bytes,$bsecs,$(echo "$best / 1000000" | bc -l | xargs printf %.1f),,,,$load" >>"$CSV"
            ;;
        *)
            local flag=() cfg=$WORK/config
            case "$v" in
                auto) ;;
                autoprof) cfg=$WORK/config-prof ;;
                *) flag=(--transport "$v") ;;
            esac
            t0=$(date +%s.%N)
            j=$(XDG_CONFIG_HOME=$cfg timeout "$COPY_TIMEOUT" "$DRSFTP" lab exec "$LAB" h2 -- "$DRSFTP" copy --json --quiet --no-resume \
                "${flag[@]}" "$url" "$dst" 2>>"$OUT/copy.log" | grep '^{' || echo '{}')
            t1=$(date +%s.%N)
            secs=$(echo "$t1 - $t0" | bc -l)
            bytes=$(stat -c %s "$dst" 2>/dev/null || echo 0)
            python3 - "$c" "$cc" "$v" "$rep" "$bytes" "$secs" "$load" "$j" "$PHASES" >>"$CSV" 3>>"$JSONL" <<'PY'
import json, os, sys
c, cc, v, rep, nbytes, secs, load, j, phases = sys.argv[1:]
c = c.replace(',', ' ')
j = json.loads(j)
# The copy's whole --json, raw, with what identifies it (one line per copy).
with os.fdopen(3, "w") as raw:
    print(json.dumps({"case": c, "cc": cc, "variant": v, "rep": int(rep), "wall_seconds": float(secs), "copy": j}), file=raw)
ch = j.get("transport_choice") or {}
reason = (ch.get("reason") or "").replace(",", ";").replace('"', "'")
mbps = int(nbytes) * 8 / float(secs) / 1e6
ph = j.get("phases") or {}
cell = lambda x: "" if x is None else f"{x:.3f}"
cols = ",".join(cell(ph.get(k)) for k in phases.split() + ["final_rate_mbps"])
print(f'{c},{cc},{v},{rep},{nbytes},{float(secs):.2f},{mbps:.1f},{ch.get("chosen","")},"{reason}",{j.get("setup_seconds") or ""},{load},{cols}')
PY
            ;;
    esac
}

write_profile() { # rate rtt loss -> paths.json for 198.18.0.1:2811, as a calibration that knew the loss would write
    python3 - "$@" <<'PY'
import json, sys, time
rate, rtt, loss = sys.argv[1:]
unit = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
bps = next(float(rate[: -len(u)]) * m for u, m in unit.items() if rate.endswith(u))
key = "198.18.0.1:2811"
p = {"host_port": key, "rtt_ms": float(rtt.rstrip("ms")), "rate_bps": bps, "c1": None, "c2": None,
     "fit_mean_rel_err": None, "fit_max_rel_err": None, "points": 0, "timestamp": int(time.time())}
if loss != "0":
    p["loss"] = float(loss.rstrip("%")) / 100
print(json.dumps({"version": 1, "paths": {key: p}}))
PY
}

for case in $CASES; do
    IFS=, read -r rate rtt loss size <<<"$case"
    for cc in $(echo "$CCS" | tr ',' ' '); do
        echo "== $case $cc (load $(cut -d' ' -f1-3 /proc/loadavg))"
        lossarg=()
        [ "$loss" = 0 ] || lossarg=(--loss "$loss")
        "$DRSFTP" lab up "$LAB" --hosts 2 --rtt "$rtt" --rate "$rate" "${lossarg[@]}" \
            --tcp-rmem "4096 131072 268435456" --tcp-wmem "4096 65536 268435456" >/dev/null
        mkdir -p "$WORK/root" "$WORK/out" "$WORK/config" "$WORK/config-prof/drsftp"
        write_profile "$rate" "$rtt" "$loss" >"$WORK/config-prof/drsftp/paths.json"
        [ -f "$WORK/root/f-$size" ] || head -c "$size" /dev/urandom >"$WORK/root/f-$size"
        "$DRSFTP" lab exec "$LAB" h1 -- "$DRSFTP" serve --root "$WORK/root" --anonymous --listen 198.18.0.1:2811 \
            --congestion "$cc" --log warn >"$OUT/serve.log" 2>&1 &
        sleep 1
        for rep in $(seq 1 "$REPS"); do
            for v in $(echo "$VARIANTS" | tr ',' ' '); do
                one "$case" "$cc" "$v" "$rep" "ftp://198.18.0.1:2811/f-$size" "$WORK/out/f"
                tail -1 "$CSV"
            done
        done
        "$DRSFTP" lab down "$LAB" >/dev/null
    done
done

python3 - "$CSV" >"$OUT/report.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def rate(s):
    n = float(s.rstrip("mbitgMG")) ; return n * (1000 if s.endswith("gbit") else 1)
groups = {}
for r in rows:
    groups.setdefault((r["case"], r["cc"]), []).append(r)
print("| case (rate rtt loss size) | cc | auto Mbit/s | auto chose | autoprof | tcp | udp | guc best | auto / link | autoprof / link | udp / link | auto / better forced | auto / guc | load1 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (c, cc), rs in groups.items():
    med = {}
    for v in ("auto", "autoprof", "tcp", "udp", "guc"):
        xs = [float(r["mbps"]) for r in rs if r["variant"] == v and float(r["mbps"]) > 0]
        med[v] = statistics.median(xs) if xs else None
    chose = sorted({r["chosen"] for r in rs if r["variant"] == "auto"})
    link = rate(c.split(" ")[0])
    f = lambda x: "–" if x is None else f"{x:.1f}"
    ratio = lambda a, b: "–" if a is None or not b else f"{a / b:.2f}"
    forced = max([x for x in (med["tcp"], med["udp"]) if x] or [0]) or None
    loads = [float(r["load1"]) for r in rs]
    print(f"| {c} | {cc} | {f(med['auto'])} | {'/'.join(chose)} | {f(med['autoprof'])} | {f(med['tcp'])} | {f(med['udp'])} | "
          f"{f(med['guc'])} | {ratio(med['auto'], link)} | {ratio(med['autoprof'], link)} | {ratio(med['udp'], link)} | "
          f"{ratio(med['auto'], forced)} | {ratio(med['auto'], med['guc'])} | "
          f"{min(loads):.1f}-{max(loads):.1f} |")
print()
print("Where the time went (median seconds per variant; `transfer` = command to end of data, which holds set-up,")
print("first datagram, ramp, first pass and tail; `wall` = the whole process; raw --json in copies.jsonl):")
print()
ks = ["login", "prepare", "setup", "first_datagram", "ramp", "first_pass", "tail", "eod", "verify"]
print("| case | cc | variant | wall | " + " | ".join(ks) + " | first-pass Mbit/s |")
print("|---|---|---|---|" + "---|" * len(ks) + "---|")
for (c, cc), rs in groups.items():
    for v in ("auto", "autoprof", "tcp", "udp"):
        vr = [r for r in rs if r["variant"] == v]
        if not vr:
            continue
        def med(k):
            xs = [float(r[k]) for r in vr if r.get(k)]
            return f"{statistics.median(xs):.2f}" if xs else "–"
        print(f"| {c} | {cc} | {v} | {med('seconds')} | " + " | ".join(med(k + "_s") for k in ks) + f" | {med('final_rate_mbps')} |")
print()
print("Reasons given by auto:")
for r in rows:
    if r["variant"] in ("auto", "autoprof"):
        print(f"- {r['variant']} {r['case']} {r['cc']} rep {r['rep']}: {r['chosen']}: {r['reason']} (blast set-up {r['setup_seconds'] or '–'} s)")
PY
cat "$OUT/report.md"
if [ "$RECORD" = 1 ]; then
    record_run transport-bench "$OUT/report.md" "$CSV" "$JSONL"
fi

#!/usr/bin/env bash
# --transport auto on the WAN lab (issue 22; report in docs/bench/auto-transport.md). Needs root, /dev/net/tun, and
# globus-url-copy for the guc variant.
# Usage: bench/transport-bench.sh [--cases "500mbit,100ms,0.1%,1G 500mbit,100ms,1%,1G"] [--cc cubic,bbr]
#                                 [--variants auto,autoprof,autowarm,tcp,udp,guc] [--reps 3] [--out DIR] [--record]
#        bench/transport-bench.sh --fair RUNS [--cases "500mbit,100ms,0,1G"] [--cc cubic] [--fair-pairs drsftp,tcpk,iperf]
#                                 [--out DIR] [--record]
# Per case (rate,rtt,loss,size; loss 0 for none) and sending-server congestion control: a 2-host lab named
# auto<pid>, `drsftp serve --congestion CC` on h1, and on h2 one download per variant and repetition: `auto` is
# `drsftp copy` with no transport flag and no path profile, `autoprof` the same with a path profile holding the
# lab's rate, RTT and loss (what calibration would store; a lossy one starts on blast), `autowarm` a default copy
# after one earlier (untimed) default copy to the same server with a fresh profile directory (it starts from the
# path memory that copy left), `tcp`/`udp` force
# `--transport`, `guc` is globus-url-copy's best of `-p 16 -tcp-bs 4M` and `-p 64 -tcp-bs 1M`, `iperf` one 10 s
# iperf3 BBR stream h1 -> h2 (the TCP ceiling of the same link). Writes DIR/runs.csv (one row per copy, with the
# auto choice, its reason, the blast set-up time and the copy's phases), DIR/copies.jsonl (each copy's whole
# --json, raw) and DIR/report.md (median Mbit/s per variant, share of the link, auto against the better forced
# transport and against guc's best, the load average). The issue's full matrix is
#   --cases "500mbit,100ms,0,1G 500mbit,100ms,0.1%,1G 500mbit,100ms,1%,1G" --cc cubic,bbr --reps 3
# and the short-transfer case "200mbit,200ms,5%,128M". Every lab is torn down on exit, also on failure. A copy that
# takes longer than COPY_TIMEOUT seconds (default 600) is recorded with 0 Mbit/s. DRSFTP_BIN overrides the binary,
# GUC_SETTINGS the globus-url-copy settings tried ("P TCPBS;P TCPBS", default "16 4M;64 1M"),
# SKIP_BUILD=1 skips the build (never build inside the quiet lock), LAB_PREFIX the lab's name prefix (default auto).
# --fair RUNS: instead of the matrix, RUNS times two simultaneous default `drsftp copy` downloads (no flags) from
# the one server in h1 into h2, sharing the h1->h2 link; every 0.2 s the bytes each copy has written (wchar in
# /proc/PID/io: its pwrite of file data) are sampled, and each copy's rate over the overlap (from FAIR_WARMUP
# seconds, default 5, after both started to the first one's last byte) is compared with half the link
# (DIR/fair.csv, DIR/fair-samples.csv, DIR/copies.jsonl, DIR/report.md). In the same run and lab, each run also
# starts baseline pairs the same way (--fair-pairs, default drsftp,tcpk,iperf): `tcpk` two `drsftp copy
# --transport tcp -p FAIR_P --buffer kernel` (fixed streams, Linux autotuning; FAIR_P default 4, what -p auto
# chooses here), `iperf` two iperf3 senders in h1 with -P FAIR_P -C CC for FAIR_IPERF_SECONDS (default 25) to h2.
# The default copies write --trace DIR/trace-CC-RUN-{a,b}.csv (per-stream window, RTT, rate; FAIR_TRACE=0: off).
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
FAIR=0
FAIR_PAIRS=drsftp,tcpk,iperf
FAIR_P=${FAIR_P:-4}
FAIR_IPERF_SECONDS=${FAIR_IPERF_SECONDS:-25}
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) CASES=$2; shift 2 ;;
        --cc) CCS=$2; shift 2 ;;
        --variants) VARIANTS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --record) RECORD=1; shift ;;
        --fair) FAIR=$2; shift 2 ;;
        --fair-pairs) FAIR_PAIRS=$2; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "${SKIP_BUILD:-}" ] || bench_build
DRSFTP=${DRSFTP_BIN:-$BENCH_TARGET/release/drsftp}
COPY_TIMEOUT=${COPY_TIMEOUT:-600}
GUC_SETTINGS=${GUC_SETTINGS:-16 4M;64 1M}
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
if [ "$FAIR" -gt 0 ]; then
    echo "case,cc,run,pair,copy,chosen,transport,reason,e2e_mbps,from_s,to_s,overlap_mbps,share,peak_streams,window_peak_bytes,load1" >"$OUT/fair.csv"
    echo "case,cc,run,pair,copy,t_s,bytes" >"$OUT/fair-samples.csv"
fi

one() { # case cc variant rep url dst -> appends a row
    local c=$1 cc=$2 v=$3 rep=$4 url=$5 dst=$6 j="" t0 t1 secs=0 bytes=0
    rm -f "$dst"
    load=$(cut -d' ' -f1 /proc/loadavg)
    case "$v" in
        guc)
            local best=0 bsecs=0 p
            local settings
            IFS=';' read -ra settings <<<"$GUC_SETTINGS"
            for p in "${settings[@]}"; do
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
        iperf)
            # The TCP ceiling of the same link: one iperf3 BBR stream h1 -> h2 (the download's direction), 10 s.
            "$DRSFTP" lab exec "$LAB" h2 -- iperf3 -s -1 -D >/dev/null 2>&1
            sleep 0.5
            local bps
            bps=$("$DRSFTP" lab exec "$LAB" h1 -- iperf3 -c 198.18.0.2 -t 10 -C bbr -J 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' || echo 0)
            echo "${c//,/ },$cc,iperf,$rep,0,10,$(echo "$bps / 1000000" | bc -l | xargs printf %.1f),,,,$load" >>"$CSV"
            ;;
        *)
            local flag=() cfg=$WORK/config
            # Each copy gets a fresh profile directory, so no copy starts from another's path memory.
            rm -rf "$WORK/config" "$WORK/config-prof"
            mkdir -p "$WORK/config" "$WORK/config-prof/drsftp"
            case "$v" in
                auto) ;;
                autoprof)
                    cfg=$WORK/config-prof
                    write_profile "$rate" "$rtt" "$loss" >"$WORK/config-prof/drsftp/paths.json"
                    ;;
                autowarm)
                    # One earlier default copy to the same server (untimed) leaves its path memory.
                    XDG_CONFIG_HOME=$cfg timeout "$COPY_TIMEOUT" "$DRSFTP" lab exec "$LAB" h2 -- "$DRSFTP" copy --json \
                        --quiet --no-resume "$url" "$dst" 2>>"$OUT/copy.log" | grep '^{' |
                        python3 -c 'import json,sys; c=json.load(sys.stdin).get("transport_choice") or {}; print("  warm-up:", c.get("chosen"), (c.get("reason") or "")[:100])' || true
                    rm -f "$dst"
                    ;;
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

fair_one() { # case cc run url pair -> two simultaneous copies (or iperf3 runs) into h2; appends to fair.csv etc.
    local c=$1 cc=$2 run=$3 url=$4 pair=$5 k pids=() spid t0 flags=()
    load=$(cut -d' ' -f1 /proc/loadavg)
    rm -f "$WORK"/out/a "$WORK"/out/b "$WORK"/pid-* "$WORK"/json-* "$WORK"/samples
    rm -rf "$WORK/config" && mkdir -p "$WORK/config" # no path memory from an earlier run
    case "$pair" in
        drsftp) [ "${FAIR_TRACE:-1}" = 0 ] || flags=(--trace "$OUT/trace-$cc-$run-KEY.csv") ;;
        tcpk) flags=(--transport tcp -p "$FAIR_P" --buffer kernel) ;;
        iperf) ;;
        *) echo "unknown fair pair $pair" >&2; return 1 ;;
    esac
    if [ "$pair" = iperf ]; then
        # Plain TCP, no drsftp: two iperf3 senders in h1 (the server's side, on CC) with FAIR_P streams each, to
        # two iperf3 servers in h2, started together; per-second sender intervals give the same overlap rate.
        for k in a b; do
            "$DRSFTP" lab exec "$LAB" h2 -- iperf3 -s -1 -D -p "$([ $k = a ] && echo 5301 || echo 5302)" >/dev/null 2>&1
        done
        sleep 0.5
        t0=$(date +%s.%N)
        for k in a b; do
            "$DRSFTP" lab exec "$LAB" h1 -- iperf3 -c 198.18.0.2 -p "$([ $k = a ] && echo 5301 || echo 5302)" \
                -P "$FAIR_P" -C "$cc" -t "$FAIR_IPERF_SECONDS" -J >"$WORK/json-$k" 2>>"$OUT/copy.log" &
            pids+=($!)
        done
        wait "${pids[@]}" || true
        python3 - "$WORK" >"$WORK/samples" <<'PY'
import json, sys
for k in "ab":
    try:
        j = json.load(open(f"{sys.argv[1]}/json-{k}"))
    except (OSError, ValueError):
        continue
    tot = 0
    print(f"0.000 {k} 0")
    for iv in j.get("intervals", []):
        tot += iv["sum"]["bytes"]
        print(f"{iv['sum']['end']:.3f} {k} {tot}")
PY
    else
        t0=$(date +%s.%N)
        for k in a b; do
            # The shell writes its PID and execs the copy, so the PID file names the copy itself (lab exec only
            # enters the network namespace).
            XDG_CONFIG_HOME=$WORK/config timeout "$COPY_TIMEOUT" "$DRSFTP" lab exec "$LAB" h2 -- sh -c 'echo $$ >"$0"; exec "$@"' \
                "$WORK/pid-$k" "$DRSFTP" copy --json --quiet --no-resume "${flags[@]/KEY/$k}" "$url" "$WORK/out/$k" \
                >"$WORK/json-$k" 2>>"$OUT/copy.log" &
            pids+=($!)
        done
        python3 - "$WORK/pid-a" "$WORK/pid-b" "$t0" >"$WORK/samples" <<'PY' &
import os, sys, time
pidfiles, t0 = sys.argv[1:3], float(sys.argv[3])
pids = {}
deadline = time.time() + 10
while len(pids) < 2 and time.time() < deadline:
    for k, f in zip("ab", pidfiles):
        try:
            pids.setdefault(k, int(open(f).read()))
        except (OSError, ValueError):
            pass
    time.sleep(0.02)
alive = dict(pids)
while alive:
    t = time.time() - t0
    for k, pid in list(alive.items()):
        try:
            w = next(int(l.split()[1]) for l in open(f"/proc/{pid}/io") if l.startswith("wchar:"))
            print(f"{t:.3f} {k} {w}", flush=True)
        except (OSError, StopIteration):
            del alive[k]
    time.sleep(0.2)
PY
        spid=$!
        wait "${pids[@]}" || true
        wait "$spid" || true
    fi
    python3 - "$c" "$cc" "$run" "$load" "$WORK" "${FAIR_WARMUP:-5}" "$OUT/fair-samples.csv" "$pair" >>"$OUT/fair.csv" 3>>"$JSONL" <<'PY'
import json, os, sys
c, cc, run, load, work, warm, samples_csv, pair = sys.argv[1:]
c, warm = c.replace(",", " "), float(warm)
s = {"a": [], "b": []}
for line in open(f"{work}/samples"):
    t, k, w = line.split()
    s[k].append((float(t), int(w)))
with open(samples_csv, "a") as f:
    for k, xs in s.items():
        for t, w in xs:
            print(f"{c},{cc},{run},{pair},{k},{t:.3f},{w}", file=f)
js = {}
with os.fdopen(3, "w") as raw:
    for k in "ab":
        try:
            if pair == "iperf":
                js[k] = json.load(open(f"{work}/json-{k}"))
            else:
                js[k] = json.loads(next(l for l in open(f"{work}/json-{k}") if l.startswith("{")))
        except (OSError, StopIteration, ValueError):
            js[k] = {}
        rec = js[k]
        if pair == "iperf":  # the whole iperf3 JSON is large; keep its totals and per-stream ends
            rec = {"end": rec.get("end", {}), "intervals": [iv["sum"] for iv in rec.get("intervals", [])]}
        print(json.dumps({"case": c, "cc": cc, "variant": "fair", "pair": pair, "rep": int(run), "copy_id": k,
                          "copy": rec}), file=raw)
# A copy's last byte: the first sample at its final count (the checksum and QUIT come after).
end = {k: next((t for t, w in xs if w >= xs[-1][1]), 0.0) if xs else 0.0 for k, xs in s.items()}
stop = min(end.values())
def at(xs, t):  # bytes written by time t, linear between samples
    prev = (0.0, 0)
    for x in xs:
        if x[0] >= t:
            return prev[1] + (x[1] - prev[1]) * (t - prev[0]) / max(x[0] - prev[0], 1e-9)
        prev = x
    return prev[1]
rates = {k: (at(xs, stop) - at(xs, warm)) * 8 / max(stop - warm, 1e-9) / 1e6 for k, xs in s.items()}
tot = sum(rates.values()) or 1
for k in "ab":
    j = js[k]
    if pair == "iperf":
        chosen, transport, reason = "iperf3", "tcp", ""
        e2e = (j.get("end", {}).get("sum_received", {}).get("bits_per_second") or 0) / 1e6
        streams = j.get("start", {}).get("test_start", {}).get("num_streams", "")
        window = ""
    else:
        ch = j.get("transport_choice") or {}
        chosen, transport = ch.get("chosen", ""), j.get("transport", "")
        reason = (ch.get("reason") or "").replace(",", ";").replace('"', "'")
        e2e = j.get("mbps") or 0
        streams = f'{j.get("auto_peak_streams") or j.get("streams") or ""}'
        window = j.get("window_peak_bytes") or ""
    print(f'{c},{cc},{run},{pair},{k},{chosen},{transport},"{reason}",{e2e:.1f},'
          f'{warm:.1f},{stop:.2f},{rates[k]:.1f},{rates[k] / tot:.3f},{streams},{window},{load}')
PY
    tail -2 "$OUT/fair.csv"
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
        if [ "$FAIR" -gt 0 ]; then
            for run in $(seq 1 "$FAIR"); do
                for pair in $(echo "$FAIR_PAIRS" | tr ',' ' '); do
                    fair_one "$case" "$cc" "$run" "ftp://198.18.0.1:2811/f-$size" "$pair"
                done
            done
        else
            for rep in $(seq 1 "$REPS"); do
                for v in $(echo "$VARIANTS" | tr ',' ' '); do
                    one "$case" "$cc" "$v" "$rep" "ftp://198.18.0.1:2811/f-$size" "$WORK/out/f"
                    tail -1 "$CSV"
                done
            done
        fi
        "$DRSFTP" lab down "$LAB" >/dev/null
    done
done

if [ "$FAIR" -gt 0 ]; then
    python3 - "$OUT/fair.csv" "$FAIR_P" >"$OUT/report.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
p = sys.argv[2]
def rate(s):
    n = float(s.rstrip("mbitgMG")) ; return n * (1000 if s.endswith("gbit") else 1)
names = {"drsftp": "drsftp copy, no flags", "tcpk": f"drsftp copy --transport tcp -p {p} --buffer kernel",
         "iperf": f"iperf3 -P {p} -C CC (memory to memory)"}
print("Two simultaneous transfers from h1 into h2, sharing the h1->h2 link, per pair: `drsftp` two default copies")
print(f"(no flags), `tcpk` two `--transport tcp -p {p} --buffer kernel` copies (fixed streams, Linux autotuning), `iperf`")
print(f"two iperf3 senders in h1 with -P {p} on the server's congestion control (plain TCP, the baseline).")
print("`overlap Mbit/s`: bytes each moved from `from` s after both started to the first one's last byte (`to`),")
print("sampled from /proc/PID/io (iperf3: its 1 s sender intervals); `/ half link` divides by half the raw link rate")
print("(within 20 %: 0.80-1.20); `share`: of the two's sum; `e2e`: the transfer's own end-to-end rate.")
print()
print("| case | cc | pair | run | copy | chose | streams (peak) | window peak MB | overlap s | overlap Mbit/s | / half link | share | e2e Mbit/s | load1 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    half = rate(r["case"].split(" ")[0]) / 2
    w = f"{int(r['window_peak_bytes']) / 1e6:.1f}" if r["window_peak_bytes"] else "–"
    print(f"| {r['case']} | {r['cc']} | {r['pair']} | {r['run']} | {r['copy']} | {r['chosen']} | {r['peak_streams'] or '–'} | {w} | "
          f"{r['from_s']}-{r['to_s']} | {r['overlap_mbps']} | {float(r['overlap_mbps']) / half:.2f} | {r['share']} | {r['e2e_mbps']} | {r['load1']} |")
print()
print("Per pair: the lower and the higher of the two `/ half link` in each run, and how many runs had both within 20 %:")
print()
print("| case | cc | pair | runs | lower / half (each run) | higher / half (each run) | runs within 20 % |")
print("|---|---|---|---|---|---|---|")
groups = {}
for r in rows:
    groups.setdefault((r["case"], r["cc"], r["pair"]), {}).setdefault(r["run"], []).append(r)
for (c, cc, pair), runs in groups.items():
    half = rate(c.split(" ")[0]) / 2
    lo, hi, ok = [], [], 0
    for run, rs in runs.items():
        xs = sorted(float(r["overlap_mbps"]) / half for r in rs)
        lo.append(xs[0]); hi.append(xs[-1])
        ok += all(0.8 <= x <= 1.2 for x in xs)
    f = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
    print(f"| {c} | {cc} | {pair}: {names.get(pair, pair)} | {len(runs)} | {f(lo)} | {f(hi)} | {ok} of {len(runs)} |")
print()
print("Reasons given by auto:")
for r in rows:
    if r["pair"] == "drsftp":
        print(f"- {r['case']} {r['cc']} run {r['run']} copy {r['copy']}: {r['chosen']}: {r['reason']}")
PY
    cat "$OUT/report.md"
    [ "$RECORD" = 1 ] && record_run transport-bench-fair "$OUT/report.md" "$OUT/fair.csv" "$OUT/fair-samples.csv" "$JSONL"
    exit 0
fi

python3 - "$CSV" >"$OUT/report.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def rate(s):
    n = float(s.rstrip("mbitgMG")) ; return n * (1000 if s.endswith("gbit") else 1)
groups = {}
for r in rows:
    groups.setdefault((r["case"], r["cc"]), []).append(r)
print("| case (rate rtt loss size) | cc | auto Mbit/s | auto chose | autoprof | autowarm | tcp | udp | guc best | iperf3 BBR | auto / link | autoprof / link | autowarm / link | udp / link | auto / better forced | autowarm / better forced | auto / guc | load1 |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (c, cc), rs in groups.items():
    med = {}
    for v in ("auto", "autoprof", "autowarm", "tcp", "udp", "guc", "iperf"):
        xs = [float(r["mbps"]) for r in rs if r["variant"] == v and float(r["mbps"]) > 0]
        med[v] = statistics.median(xs) if xs else None
    chose = sorted({r["chosen"] for r in rs if r["variant"] == "auto"})
    link = rate(c.split(" ")[0])
    f = lambda x: "–" if x is None else f"{x:.1f}"
    ratio = lambda a, b: "–" if a is None or not b else f"{a / b:.2f}"
    forced = max([x for x in (med["tcp"], med["udp"]) if x] or [0]) or None
    loads = [float(r["load1"]) for r in rs]
    print(f"| {c} | {cc} | {f(med['auto'])} | {'/'.join(chose)} | {f(med['autoprof'])} | {f(med['autowarm'])} | {f(med['tcp'])} | {f(med['udp'])} | "
          f"{f(med['guc'])} | {f(med['iperf'])} | {ratio(med['auto'], link)} | {ratio(med['autoprof'], link)} | {ratio(med['autowarm'], link)} | {ratio(med['udp'], link)} | "
          f"{ratio(med['auto'], forced)} | {ratio(med['autowarm'], forced)} | {ratio(med['auto'], med['guc'])} | "
          f"{min(loads):.1f}-{max(loads):.1f} |")
print()
print("Where the time went (median seconds per variant; `transfer` = command to end of data, which holds set-up,")
print("first datagram, ramp, first pass and tail; `wall` = the whole process; raw --json in copies.jsonl):")
print()
ks = ["login", "prepare", "setup", "first_datagram", "ramp", "first_pass", "tail", "eod", "verify"]
print("| case | cc | variant | wall | " + " | ".join(ks) + " | first-pass Mbit/s |")
print("|---|---|---|---|" + "---|" * len(ks) + "---|")
for (c, cc), rs in groups.items():
    for v in ("auto", "autoprof", "autowarm", "tcp", "udp"):
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
    if r["variant"] in ("auto", "autoprof", "autowarm"):
        print(f"- {r['variant']} {r['case']} {r['cc']} rep {r['rep']}: {r['chosen']}: {r['reason']} (blast set-up {r['setup_seconds'] or '–'} s)")
PY
cat "$OUT/report.md"
if [ "$RECORD" = 1 ]; then
    record_run transport-bench "$OUT/report.md" "$CSV" "$JSONL"
fi

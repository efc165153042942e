#!/usr/bin/env bash
# bench/faults.sh: the fault campaign of issue 20 (docs/bench/faults.md). On a 2-host lab (h1 serves with
# `drsftp serve`, h2 runs `drsftp copy`), each round runs every fault once and checks that it ends in a verified
# file (SHA-256 against the source) or a clear error with no file that looks complete:
#   dl-kill-e     download -p 2 (MODE E), client SIGKILLed at ~1/4, rerun (resumes with REST ranges)
#   dl-kill-s     download -p 1 (stream mode), client SIGKILLed, rerun (resumes with REST offset)
#   dl-srv-kill   download -p 2, server SIGKILLed at ~1/4 and restarted on the same port, rerun
#   dl-link-cut   download -p 2, the path cut for 5 s (blackhole routes on both hosts) at ~1/4
#   dl-disk-full  download into an 8 MiB tmpfs (private mount namespace): must fail, leaving no file
#   up-kill       upload -p 2, client SIGKILLed after 1 s, rerun (resumes from the server's kept partial)
#   up-kill-g     upload -p 2 to globus-gridftp-server (h1), client SIGKILLed at ~1/4, rerun (resumes from the
#                 111 restart markers the client kept plus the bytes past them that CKSM confirms); "again" is
#                 the length of Globus's file after the kill minus what the rerun did not send
#   tree-delete   copy -r of 8 files, one deleted on the source mid-job: that file fails, the rest verify
#   3p-kill       third-party copy h1 -> h2 server, client SIGKILLed after 1 s, rerun
# For the resumed downloads, "again" is what the killed run had written (4 KiB chunks of the part file equal to
# the source) outside the ranges its last checkpoint held, i.e. what the rerun asked for a second time; the bound
# checked is 1 % of the file plus one 256 KiB block per stream. Usage: bench/faults.sh [--rounds N] [--size MIB] [--rate R] [--record]   (root; lab name `rsm`)
set -euo pipefail
RECORD_ARGV=("$0" "$@")
. "$(dirname "$0")/lib/record.sh"
ROUNDS=3 SIZE_MIB=24 RATE=40mbit RECORD=0 LAB=rsm
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --size) SIZE_MIB=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --record) RECORD=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
D=$BENCH_TARGET/release/drsftp
[ -x "$D" ] || bench_build
WORK=$(mktemp -d /tmp/rsm-faults.XXXXXX)
NS1=drs-$LAB-h1 NS2=drs-$LAB-h2 A1=198.18.0.1 A2=198.18.0.2
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$D" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"$D" lab up "$LAB" --rtt 4ms --rate "$RATE" --hosts 2 >/dev/null
mkdir -p "$WORK/root/t" "$WORK/dst"
SIZE=$((SIZE_MIB * 1048576 + 4321))
head -c "$SIZE" /dev/urandom >"$WORK/root/src.bin"
SUM=$(sha256sum "$WORK/root/src.bin" | cut -d' ' -f1)
for i in 0 1 2 3 4 5 6 7; do head -c $((2 * 1048576)) /dev/urandom >"$WORK/root/t/f$i.bin"; done
PORT1=$((20000 + RANDOM % 20000)) PORT2=$((PORT1 + 1))

serve() { # serve NS ADDR PORT ROOT LOGNAME -> SRV
  ip netns exec "$1" "$D" serve --listen "$2:$3" --anonymous --anonymous-write --third-party all \
    --root "$4" --transfer-log "$WORK/$5.xfer.jsonl" >>"$WORK/$5.log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  for _ in $(seq 100); do
    ip netns exec "$NS2" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server on $2:$3 did not start" >&2
  exit 1
}
serve "$NS1" "$A1" "$PORT1" "$WORK/root" s1; S1=$SRV
# globus-gridftp-server (anonymous as nobody) looks its own name up: a private /etc/hosts in its mount namespace.
GSRV=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
PORT3=$((PORT1 + 2))
chmod 755 "$WORK"; mkdir -p "$WORK/groot" "$WORK/state"; chmod 777 "$WORK/groot"
printf '127.0.0.1 localhost %s\n%s h1\n' "$(hostname)" "$A1" >"$WORK/hosts"
ip netns exec "$NS1" unshare -m sh -c "mount --bind $WORK/hosts /etc/hosts && exec $GSRV -aa -anonymous-user nobody \
  -p $PORT3 -control-interface $A1 -data-interface $A1 -home-dir / -l $WORK/globus.log" </dev/null >/dev/null 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do ip netns exec "$NS2" bash -c "exec 3<>/dev/tcp/$A1/$PORT3" 2>/dev/null && break; sleep 0.1; done
mkdir -p "$WORK/root2"
serve "$NS2" "$A2" "$PORT2" "$WORK/root2" s2
URL=ftp://$A1:$PORT1

copy() { ip netns exec "$NS2" "$D" copy "$@"; }
# Background copies are started with `ip netns exec` directly (it execs), so $! is drsftp's own PID.
held() { # bytes a ranges checkpoint holds
  [ -f "$1" ] || { echo 0; return; }
  sed -n '/^$/,$p' "$1" | tail -n +2 | tr ',' '\n' | awk -F- 'NF==2 {s += $2 - $1} END {print s + 0}'
}
again_of() { # again_of PART CK SRC: bytes written to PART (equal to SRC) outside the ranges CK holds
  python3 - "$1" "$2" "$3" <<'PY'
import sys
part, ck, src = (open(p, "rb").read() for p in sys.argv[1:4])
held = [tuple(map(int, r.split(b"-"))) for r in ck.split(b"\n\n", 1)[1].split(b",") if r]
def inside(a, b):
    return sum(max(0, min(b, e) - max(a, s)) for s, e in held)
again = 0
for o in range(0, len(part), 4096):
    n = min(4096, len(part) - o)
    if part[o:o + n] == src[o:o + n] and any(part[o:o + n]):
        again += n - inside(o, o + n)
print(again)
PY
}
wait_ck() { # wait_ck CK BYTES PID: until the checkpoint holds BYTES (or the copy ended)
  for _ in $(seq 600); do
    [ "$(held "$1")" -ge "$2" ] && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}
cut_link() { # 5 s without a path: blackhole routes to the other host on both (no sch_netem needed)
  ip netns exec "$NS1" ip route add blackhole "$A2/32"
  ip netns exec "$NS2" ip route add blackhole "$A1/32"
  sleep 5
  ip netns exec "$NS1" ip route del blackhole "$A2/32"
  ip netns exec "$NS2" ip route del blackhole "$A1/32"
}
json() { # json KEY < stdout of a --json run: the key's value, 0 if there is none
  python3 -c 'import json,sys
try: print(json.loads([l for l in sys.stdin if l.startswith("{")][0]).get(sys.argv[1], 0))
except Exception: print(0)' "$1"
}

CSV=$WORK/faults.csv
echo "round,fault,outcome,size,resumed,again,bound,within,detail" >"$CSV"
row() { echo "$1,$2,$3,$4,$5,$6,$7,$8,\"$9\"" >>"$CSV"; echo "round $1 $2: $3 ${9}"; }

verify() { # verify FILE SUM -> ok|BAD
  if [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; then echo verified; else echo BAD; fi
}

resume_run() { # resume_run ROUND NAME STREAMS KILL(client|server)
  local r=$1 name=$2 p=$3 how=$4 dst="$WORK/dst/$2-$1.bin"
  local ck part
  part="$WORK/dst/.$name-$r.bin.drsftp-part"; ck="$part.ck"
  ip netns exec "$NS2" "$D" copy -q -p "$p" "$URL/src.bin" "$dst" >/dev/null 2>&1 &
  local c=$!
  PIDS+=("$c")
  if ! wait_ck "$ck" $((SIZE / 4)) "$c"; then row "$r" "$name" BAD "$SIZE" 0 0 0 no "no cut"; return; fi
  if [ "$how" = server ]; then
    kill -9 "$S1"; wait "$S1" 2>/dev/null || true
    wait "$c" 2>/dev/null || true
  else
    kill -9 "$c"; wait "$c" 2>/dev/null || true
  fi
  local looks=no; [ -e "$dst" ] && looks=yes
  local written; written=$(again_of "$part" "$ck" "$WORK/root/src.bin" 2>/dev/null || echo -1)
  [ "$how" = server ] && { serve "$NS1" "$A1" "$PORT1" "$WORK/root" s1; S1=$SRV; }
  local out; out=$(copy --json -p "$p" "$URL/src.bin" "$dst" 2>"$WORK/err.txt") || true
  local resumed; resumed=$(echo "$out" | json resumed_bytes)
  local again=$written bound=$((SIZE / 100 + p * 262144))
  local within=no; [ "$again" -ge 0 ] && [ "$again" -le "$bound" ] && [ "$resumed" -gt 0 ] && within=yes
  local v; v=$(verify "$dst" "$SUM"); [ "$looks" = yes ] && v=BAD
  row "$r" "$name" "$v" "$SIZE" "$resumed" "$again" "$bound" "$within" "killed at ~1/4"
  rm -f "$dst"
}

for r in $(seq "$ROUNDS"); do
  resume_run "$r" dl-kill-e 2 client
  resume_run "$r" dl-kill-s 1 client
  resume_run "$r" dl-srv-kill 2 server

  # Link cut for 5 s mid-file: TCP rides it out (the stall limit is 60 s).
  dst="$WORK/dst/cut-$r.bin"
  ip netns exec "$NS2" "$D" copy -q -p 2 "$URL/src.bin" "$dst" >/dev/null 2>"$WORK/err.txt" &
  c=$!; PIDS+=("$c")
  wait_ck "$WORK/dst/.cut-$r.bin.drsftp-part.ck" $((SIZE / 4)) "$c" || true
  cut_link
  if wait "$c"; then row "$r" dl-link-cut "$(verify "$dst" "$SUM")" "$SIZE" 0 0 0 - "rode out 5 s"
  else row "$r" dl-link-cut "clear-error" "$SIZE" 0 0 0 - "$(tail -1 "$WORK/err.txt" | tr -d '"')"; fi
  rm -f "$dst"

  # Disk full at the destination.
  err=$(ip netns exec "$NS2" unshare -m sh -c "mkdir -p '$WORK/full' && mount -t tmpfs -o size=8m none '$WORK/full' && \
    '$D' copy -q -p 2 '$URL/src.bin' '$WORK/full/f.bin'; s=\$?; ls -A '$WORK/full' >'$WORK/full.ls'; exit \$s" 2>&1) \
    && row "$r" dl-disk-full BAD "$SIZE" 0 0 0 - "copy succeeded on a full disk" \
    || { if [ -s "$WORK/full.ls" ] && grep -qx 'f.bin' "$WORK/full.ls"; then row "$r" dl-disk-full BAD "$SIZE" 0 0 0 - "left f.bin";
         else row "$r" dl-disk-full clear-error "$SIZE" 0 0 0 - "$(echo "$err" | tail -1 | tr -d '"')"; fi; }

  # Upload killed after 1 s, rerun.
  ip netns exec "$NS2" "$D" copy -q -p 2 "$WORK/root/src.bin" "$URL/up-$r.bin" >/dev/null 2>&1 &
  c=$!; PIDS+=("$c"); sleep 1; kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  looks=no; [ -e "$WORK/root/up-$r.bin" ] && looks=yes
  out=$(copy --json -p 2 "$WORK/root/src.bin" "$URL/up-$r.bin" 2>/dev/null) || true
  v=$(verify "$WORK/root/up-$r.bin" "$SUM"); [ "$looks" = yes ] && v=BAD
  res=$(echo "$out" | json resumed_bytes); within=no; [ "$res" -gt 0 ] && within=yes
  row "$r" up-kill "$v" "$SIZE" "$res" - - "$within" "resumed from the kept partial (SITE PARTIAL)"
  rm -f "$WORK/root/up-$r.bin"

  # Upload to Globus killed at ~1/4, rerun: resumes from the client's restart-marker record.
  g="$WORK/groot/up-$r.bin"; gurl="ftp://$A1:$PORT3$g"
  XDG_STATE_HOME=$WORK/state ip netns exec "$NS2" "$D" copy -q -p 2 --retries 0 "$WORK/root/src.bin" "$gurl" \
    >/dev/null 2>&1 &
  c=$!; PIDS+=("$c")
  for _ in $(seq 3000); do [ -f "$g" ] && [ "$(stat -c %s "$g")" -ge $((SIZE / 4)) ] && break; kill -0 "$c" 2>/dev/null || break; sleep 0.01; done
  kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  sleep 0.5
  gheld=$(stat -c %s "$g" 2>/dev/null || echo 0)
  out=$(XDG_STATE_HOME=$WORK/state copy --json -p 2 "$WORK/root/src.bin" "$gurl" 2>"$WORK/err.txt") || true
  res=$(echo "$out" | json resumed_bytes); again=$((gheld - res)); bound=$((SIZE / 100 + 2 * 262144))
  within=no; [ "$res" -gt 0 ] && [ "$again" -le "$bound" ] && within=yes
  v=$(verify "$g" "$SUM")
  row "$r" up-kill-g "$v" "$SIZE" "$res" "$again" "$bound" "$within" "Globus held $gheld after the kill"
  rm -f "$g"

  # A file deleted on the source mid-job.
  rm -rf "$WORK/tree"; cp -r "$WORK/root/t" "$WORK/root/t$r"
  ip netns exec "$NS2" "$D" copy --json -r -p 1 --concurrency 1 "$URL/t$r/" "$WORK/tree" >"$WORK/tree.json" 2>/dev/null &
  c=$!; PIDS+=("$c")
  for _ in $(seq 500); do [ -e "$WORK/tree/f1.bin" ] && break; sleep 0.01; done
  rm -f "$WORK/root/t$r/f6.bin"
  if wait "$c"; then row "$r" tree-delete BAD 0 0 0 0 - "job succeeded";
  else
    ok=0; for i in 0 1 2 3 4 5 7; do [ "$(verify "$WORK/tree/f$i.bin" "$(sha256sum "$WORK/root/t/f$i.bin" | cut -d' ' -f1)")" = verified ] && ok=$((ok + 1)); done
    failed=$(json failed <"$WORK/tree.json")
    if [ "$ok" = 7 ] && [ "$failed" = 1 ] && [ ! -e "$WORK/tree/f6.bin" ]; then row "$r" tree-delete clear-error 0 0 0 0 - "7 verified, f6 failed"
    else row "$r" tree-delete BAD 0 0 0 0 - "$ok verified, failed=$failed"; fi
  fi
  rm -rf "$WORK/root/t$r"

  # Third-party copy killed after 1 s, rerun.
  ip netns exec "$NS2" "$D" copy -q -p 2 "$URL/src.bin" "ftp://$A2:$PORT2/tp-$r.bin" >/dev/null 2>&1 &
  c=$!; PIDS+=("$c"); sleep 1; kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  sleep 0.5
  looks=no; [ -e "$WORK/root2/tp-$r.bin" ] && [ "$(verify "$WORK/root2/tp-$r.bin" "$SUM")" = BAD ] && looks=yes
  copy -q -p 2 "$URL/src.bin" "ftp://$A2:$PORT2/tp-$r.bin" >/dev/null 2>&1 || true
  v=$(verify "$WORK/root2/tp-$r.bin" "$SUM"); [ "$looks" = yes ] && v=BAD
  row "$r" 3p-kill "$v" "$SIZE" 0 - - - "third-party restarts from zero"
  rm -f "$WORK/root2/tp-$r.bin"
done

REPORT=$WORK/README.md
{
  echo "# Fault campaign: $ROUNDS rounds, $SIZE-byte file, lab $RATE, 4 ms RTT"
  echo
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  awk -F, 'NR > 1 {n++; o[$3]++; if ($8 == "yes") w++; if ($8 == "no" && $6 != "-") nw++}
    END {printf "runs %d: verified %d, clear error %d, BAD %d; resumed within bound %d, not %d\n", n, o["verified"], o["clear-error"], o["BAD"], w, nw}' "$CSV"
  echo
  echo '```'
  column -s, -t <"$CSV"
  echo '```'
} >"$REPORT"
cat "$REPORT"
if [ "$RECORD" = 1 ]; then record_run faults "$REPORT" "$CSV"; fi

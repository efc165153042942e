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
#   3p-kill       third-party copy h1 -> h2 server, client SIGKILLed at ~1/4 of the destination's kept partial,
#                 rerun (resumes from the kept partial: SITE PARTIAL + REST ranges to both servers)
#   3p-dst-kill   third-party copy, the destination server SIGKILLed at ~1/4 and restarted, rerun
#   3p-src-kill   third-party copy, the source server SIGKILLed at ~1/4 and restarted, rerun
#   3p-link-cut   third-party copy, the path between h1 and h2 (data and both control connections) cut for 5 s
#   3p-disk-full  third-party copy to a drsftp serve whose root is an 8 MiB tmpfs (private mount namespace):
#                 a clear error naming the full disk, no file under the final name
#   up-srv-kill   upload -p 2, the server SIGKILLed at ~1/4 of its kept partial and restarted, rerun
#   up-link-cut   upload -p 2, the path cut for 5 s at ~1/4
#   up-disk-full  upload to the 8 MiB-tmpfs server: the client surfaces the server's refusal, no final file
#   up-srv-kill-g upload -p 2 to globus-gridftp-server, the server (daemon and session) SIGKILLed at ~1/4 and
#                 restarted, rerun (resumes from the client's marker record and CKSM)
#   tree-kill     copy -r of 8 files of 9 MiB, the client SIGKILLed mid-tree (3 files done, the 4th partial), rerun:
#                 the complete files skipped, the partial one resumed, every file verified
#   tree-kill-b   as tree-kill with 8 files of 6 MiB, which go in pipelined batches: the file in flight resumes
#                 from its checkpoint (REST ranges before its RETR in the rerun's batch)
#   tree-up-kill  copy -r upload of 8 files of 9 MiB to drsftp serve, the client SIGKILLed with 3 files done and
#                 the 4th kept partial, rerun: complete files skipped, the partial one resumed (SITE PARTIAL)
#   tree-3p-kill  the same for a third-party copy -r h1 -> h2 (the destination's kept partial, REST to both)
#   dl-stall      download -p 2 with --timeout 3s, the path cut for 8 s (past the stall limit): a clear error,
#                 then a rerun resumes and verifies
# For third-party and upload resumes to drsftp serve, "again" is what the rerun sent (the destination's
# --transfer-log STOR line) minus what the destination's kept partial did not hold before the rerun.
# For the resumed downloads, "again" is what the killed run had written (4 KiB chunks of the part file equal to
# the source) outside the ranges its last checkpoint held, i.e. what the rerun asked for a second time; the bound
# checked is 1 % of the file plus one 256 KiB block per stream.
# Usage: bench/faults.sh [--rounds N] [--size MIB] [--rate R] [--only ROW,ROW,...] [--lab NAME] [--record]
# (root; lab name `flt` unless --lab)
set -euo pipefail
RECORD_ARGV=("$0" "$@")
. "$(dirname "$0")/lib/record.sh"
ROUNDS=3 SIZE_MIB=24 RATE=40mbit RECORD=0 LAB=flt ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --size) SIZE_MIB=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --record) RECORD=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --lab) LAB=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
D=$BENCH_TARGET/release/drsftp
[ -x "$D" ] || bench_build
WORK=$(mktemp -d "/tmp/$LAB-faults.XXXXXX")
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }
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
gserve() { # globus-gridftp-server on h1 -> GS (it forks a process per session: gkill ends both)
  ip netns exec "$NS1" unshare -m sh -c "mount --bind $WORK/hosts /etc/hosts && exec $GSRV -aa -anonymous-user nobody \
    -p $PORT3 -control-interface $A1 -data-interface $A1 -home-dir / -l $WORK/globus.log" </dev/null >/dev/null 2>&1 &
  GS=$!
  PIDS+=("$GS")
  for _ in $(seq 100); do ip netns exec "$NS2" bash -c "exec 3<>/dev/tcp/$A1/$PORT3" 2>/dev/null && return 0; sleep 0.1; done
  echo "globus-gridftp-server did not start" >&2
  exit 1
}
gkill() { # SIGKILL the Globus daemon and its session processes (children of it, by PID)
  local kids; kids=$(pgrep -P "$GS" || true)
  kill -9 "$GS" $kids 2>/dev/null || true
  wait "$GS" 2>/dev/null || true
  for _ in $(seq 100); do ip netns exec "$NS2" bash -c "exec 3<>/dev/tcp/$A1/$PORT3" 2>/dev/null || return 0; sleep 0.1; done
}
gserve
mkdir -p "$WORK/root2"
serve "$NS2" "$A2" "$PORT2" "$WORK/root2" s2; S2=$SRV
# A third server (h2) whose root is an 8 MiB tmpfs in its own mount namespace: disk full at the destination of
# uploads and third-party copies. Only that namespace sees the tmpfs: look inside with nsenter.
PORT4=$((PORT1 + 3))
mkdir -p "$WORK/full3"
ip netns exec "$NS2" unshare -m sh -c "mount -t tmpfs -o size=8m none '$WORK/full3' && exec '$D' serve \
  --listen $A2:$PORT4 --anonymous --anonymous-write --third-party all --root '$WORK/full3' \
  --transfer-log '$WORK/s3.xfer.jsonl'" >>"$WORK/s3.log" 2>&1 &
S3=$!; PIDS+=("$S3")
for _ in $(seq 100); do ip netns exec "$NS2" bash -c "exec 3<>/dev/tcp/$A2/$PORT4" 2>/dev/null && break; sleep 0.1; done
in3() { nsenter -t "$S3" -m "$@"; } # a command in the tmpfs server's mount namespace
URL=ftp://$A1:$PORT1

copy() { ip netns exec "$NS2" "$D" copy "$@"; }
# Background copies are started with `ip netns exec` directly (it execs), so $! is drsftp's own PID.
held() { # bytes a ranges checkpoint holds
  [ -f "$1" ] || { echo 0; return; }
  sed -n '/^$/,$p' "$1" 2>/dev/null | tail -n +2 | tr ',' '\n' | awk -F- 'NF==2 {s += $2 - $1} END {print s + 0}' || true
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
cut_link() { # cut_link [SECONDS]: 5 s without a path: blackhole routes to the other host on both (no sch_netem)
  ip netns exec "$NS1" ip route add blackhole "$A2/32"
  ip netns exec "$NS2" ip route add blackhole "$A1/32"
  sleep "${1:-5}"
  ip netns exec "$NS1" ip route del blackhole "$A2/32"
  ip netns exec "$NS2" ip route del blackhole "$A1/32"
}
json() { # json KEY < stdout of a --json run: the key's value, 0 if there is none
  python3 -c 'import json,sys
try: print(json.loads([l for l in sys.stdin if l.startswith("{")][0]).get(sys.argv[1], 0))
except Exception: print(0)' "$1"
}

kept() { # kept ROOT: bytes the largest kept partial under a drsftp serve root holds (its record, .ck)
  local m=0 n f
  for f in "$1"/.drsftp-part.kept/*.ck; do [ -f "$f" ] || continue; n=$(held "$f"); [ "$n" -gt "$m" ] && m=$n; done
  echo "$m"
}
stor_bytes() { # stor_bytes LOG: the bytes of each STOR line of a server's transfer log, one a line
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except ValueError: continue
    if j.get("command") == "STOR": print(j["bytes"])' "$1" 2>/dev/null || true
}
stors() { stor_bytes "$1" | wc -l; }
stor_after() { # stor_after LOG N: the bytes of STOR line N+1 once it is there (-1 if it never comes)
  for _ in $(seq 300); do
    [ "$(stors "$1")" -gt "$2" ] && { stor_bytes "$1" | sed -n "$(($2 + 1))p"; return; }
    sleep 0.1
  done
  echo -1
}
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds (bounded)
  local n=$(($1 * 10)); shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}
kept_ge() { [ "$(kept "$1")" -ge "$2" ]; }
exited() { ! kill -0 "$1" 2>/dev/null; }

CSV=$WORK/faults.csv
echo "round,fault,outcome,size,resumed,again,bound,within,detail" >"$CSV"
row() { echo "$1,$2,$3,$4,$5,$6,$7,$8,\"${9//,/;}\"" >>"$CSV"; echo "round $1 $2: $3 ${9}"; }

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

restart() { # restart S1|S2: that (SIGKILLed) drsftp serve started again on the same address
  if [ "$1" = S1 ]; then wait "$S1" 2>/dev/null || true; serve "$NS1" "$A1" "$PORT1" "$WORK/root" s1; S1=$SRV
  else wait "$S2" 2>/dev/null || true; serve "$NS2" "$A2" "$PORT2" "$WORK/root2" s2; S2=$SRV; fi
}
remote_resume() { # remote_resume ROUND NAME SRC KILL(client|S1|S2) DEST(S1|S2): a kill at ~1/4, a rerun
  local r=$1 name=$2 src=$3 how=$4 f="$2-$1.bin" droot=$WORK/root dlog=$WORK/s1.xfer.jsonl dst=$URL/$2-$1.bin
  [ "$5" = S2 ] && { droot=$WORK/root2; dlog=$WORK/s2.xfer.jsonl; dst=ftp://$A2:$PORT2/$f; }
  local before; before=$(stors "$dlog")
  ip netns exec "$NS2" "$D" copy -q -p 2 --retries 0 "$src" "$dst" >/dev/null 2>&1 &
  local c=$! ok=no
  PIDS+=("$c")
  for _ in $(seq 1200); do kept_ge "$droot" $((SIZE / 4)) && { ok=yes; break; }; exited "$c" && break; sleep 0.05; done
  if [ $ok = no ]; then kill -9 "$c" 2>/dev/null || true; row "$r" "$name" BAD "$SIZE" 0 0 0 no "no cut"; return; fi
  case $how in
    client) kill -9 "$c"; wait "$c" 2>/dev/null || true ;;
    S1 | S2) if [ "$how" = S1 ]; then kill -9 "$S1"; else kill -9 "$S2"; fi; wait "$c" 2>/dev/null || true; restart "$how" ;;
  esac
  local looks=no; [ -e "$droot/$f" ] && looks=yes
  # A live destination saves the partial once it notices the dead connections and logs the failed STOR.
  [ "$how" != "$5" ] && stor_after "$dlog" "$before" >/dev/null
  local held; held=$(kept "$droot")
  local before2; before2=$(stors "$dlog")
  local out; out=$(copy --json -p 2 "$src" "$dst" 2>"$WORK/err.txt") || true
  local resumed; resumed=$(echo "$out" | json resumed_bytes)
  local sent; sent=$(stor_after "$dlog" "$before2")
  local again=$((sent - (SIZE - held))) bound=$((SIZE / 100 + 2 * 262144))
  local within=no; [ "$sent" -ge 0 ] && [ "$again" -le "$bound" ] && [ "$resumed" -gt 0 ] && within=yes
  local v; v=$(verify "$droot/$f" "$SUM"); [ "$looks" = yes ] && v=BAD
  row "$r" "$name" "$v" "$SIZE" "$resumed" "$again" "$bound" "$within" "kill $how at ~1/4; held $held, rerun sent $sent"
  rm -f "$droot/$f"
}
cut_row() { # cut_row ROUND NAME SRC DSTURL DSTFILE DROOT: the path cut for 5 s at ~1/4 of DROOT's kept partial
  local r=$1 name=$2 src=$3 dst=$4 file=$5 droot=$6
  ip netns exec "$NS2" "$D" copy -q -p 2 --retries 0 "$src" "$dst" >/dev/null 2>"$WORK/err.txt" &
  local c=$!; PIDS+=("$c")
  for _ in $(seq 1200); do kept_ge "$droot" $((SIZE / 4)) && break; exited "$c" && break; sleep 0.05; done
  cut_link
  if wait "$c"; then row "$r" "$name" "$(verify "$file" "$SUM")" "$SIZE" 0 0 0 - "rode out 5 s"
  else
    local e; e=$(tail -1 "$WORK/err.txt" | tr -d '",')
    local out; out=$(copy --json -p 2 "$src" "$dst" 2>/dev/null) || true
    row "$r" "$name" "$(verify "$file" "$SUM")" "$SIZE" "$(echo "$out" | json resumed_bytes)" - - - "failed ($e), rerun"
  fi
  rm -f "$file"
}
full_row() { # full_row ROUND NAME SRC: a copy to the 8 MiB-tmpfs server must fail clearly, leaving no f.bin
  local r=$1 name=$2 e
  if e=$(copy -q -p 2 --retries 0 "$3" "ftp://$A2:$PORT4/f.bin" 2>&1); then
    row "$r" "$name" BAD "$SIZE" 0 0 0 - "copy succeeded on a full disk"
  elif in3 test -e "$WORK/full3/f.bin"; then row "$r" "$name" BAD "$SIZE" 0 0 0 - "left f.bin"
  elif ! echo "$e" | grep -qiE 'space|452|552|553|full'; then
    row "$r" "$name" BAD "$SIZE" 0 0 0 - "unclear: $(echo "$e" | tail -1 | tr -d '",')"
  else row "$r" "$name" clear-error "$SIZE" 0 0 0 - "$(echo "$e" | tail -1 | tr -d '",')"; fi
  in3 sh -c "rm -rf '$WORK/full3'/* '$WORK/full3'/.[!.]*"
}
tksrc() { # tksrc NAME MIB: 8 files of MIB MiB + 4321 bytes in $WORK/NAME (made once)
  [ -d "$WORK/$1" ] && return
  mkdir -p "$WORK/$1"
  for i in 0 1 2 3 4 5 6 7; do head -c $(($2 * 1048576 + 4321)) /dev/urandom >"$WORK/$1/f$i.bin"; done
}
tree_kill() { # tree_kill ROUND [NAME MIB]: copy -r of 8 files killed with 3 files done and the 4th partial, rerun
  # 9 MiB (tree-kill): the one-file path; 6 MiB (tree-kill-b): pipelined batches (up to plan.rs BATCH_MAX_FILE).
  local r=$1 name=${2:-tree-kill} mib=${3:-9} t="$WORK/tk" c nd=0 part="" ck i src
  src=tksrc$mib; tksrc "$src" "$mib"
  local size=$((mib * 1048576 + 4321))
  rm -rf "$t"; cp -r "$WORK/$src" "$WORK/root/tk$r"
  ip netns exec "$NS2" "$D" copy -q -r -p 1 --concurrency 1 --retries 0 "$URL/tk$r/" "$t" >/dev/null 2>&1 &
  c=$!; PIDS+=("$c")
  for _ in $(seq 1200); do
    nd=$(find "$t" -maxdepth 1 -name 'f*.bin' 2>/dev/null | wc -l || true)
    if [ "$nd" -ge 3 ]; then
      for ck in "$t"/.f*.bin.drsftp-part.ck; do [ -f "$ck" ] && [ "$(held "$ck")" -gt 0 ] && part=${ck%.ck}; done
      [ -n "$part" ] && break
    fi
    exited "$c" && break; sleep 0.01
  done
  kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  if [ -z "$part" ]; then row "$r" "$name" BAD 0 0 0 0 no "no partial caught"; rm -rf "$WORK/root/tk$r"; return; fi
  local n=${part##*/.}; n=${n%.drsftp-part}
  local again; again=$(again_of "$part" "$part.ck" "$WORK/$src/$n" 2>/dev/null || echo -1)
  local bad=0 f; nd=0
  for f in "$t"/f*.bin; do [ -f "$f" ] || continue; nd=$((nd + 1))
    [ "$(verify "$f" "$(sha256sum "$WORK/$src/${f##*/}" | cut -d' ' -f1)")" = verified ] || bad=1; done
  local out; out=$(copy --json -r -p 1 --concurrency 1 "$URL/tk$r/" "$t" 2>/dev/null) || true
  local skipped resumed
  skipped=$(echo "$out" | json skipped)
  resumed=$(echo "$out" | python3 -c 'import json,sys
try: print(sum(x["resumed_bytes"] for x in json.loads(sys.stdin.read())["records"]))
except Exception: print(0)')
  local ok=0; for i in 0 1 2 3 4 5 6 7; do
    [ "$(verify "$t/f$i.bin" "$(sha256sum "$WORK/$src/f$i.bin" | cut -d' ' -f1)")" = verified ] && ok=$((ok + 1)); done
  local bound=$((size / 100 + 262144)) within=no
  [ "$resumed" -gt 0 ] && [ "$again" -ge 0 ] && [ "$again" -le "$bound" ] && within=yes
  local v=BAD; [ "$ok" = 8 ] && [ "$bad" = 0 ] && [ "$skipped" = "$nd" ] && v=verified
  row "$r" "$name" "$v" "$size" "$resumed" "$again" "$bound" "$within" \
    "$nd complete at the kill, $skipped skipped, $n resumed, $ok/8 verified"
  rm -rf "$WORK/root/tk$r" "$t"
}
tree_remote_kill() { # tree_remote_kill ROUND NAME SRC DSTURL DDIR DROOT DLOG: copy -r -p 2 of 8 files of 9 MiB to a
  # drsftp serve, the client SIGKILLed with 3 files done and the 4th kept partial (>= 1 MiB), rerun. "again": the
  # rerun's STOR bytes minus the bytes of the files it had to send (what the kept partial did not hold).
  local r=$1 name=$2 src=$3 dst=$4 ddir=$5 droot=$6 dlog=$7 c nd=0 i
  tksrc tksrc9 9; local size=$((9 * 1048576 + 4321))
  local before; before=$(stors "$dlog")
  ip netns exec "$NS2" "$D" copy -q -r -p 2 --concurrency 1 --retries 0 "$src" "$dst" >/dev/null 2>&1 &
  c=$!; PIDS+=("$c")
  for _ in $(seq 1200); do
    nd=$(find "$ddir" -maxdepth 1 -name 'f*.bin' 2>/dev/null | wc -l || true)
    [ "$nd" -ge 3 ] && kept_ge "$droot" 1048576 && break
    exited "$c" && break; sleep 0.01
  done
  kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  nd=$(find "$ddir" -maxdepth 1 -name 'f*.bin' 2>/dev/null | wc -l || true)
  # The destination logs the failed STOR (and saves its partial) once it notices the dead connections.
  stor_after "$dlog" $((before + nd)) >/dev/null
  local held; held=$(kept "$droot")
  if [ "$held" -eq 0 ]; then row "$r" "$name" BAD "$size" 0 0 0 no "no kept partial caught ($nd done)"; rm -rf "$ddir"; return; fi
  local bad=0 f
  for f in "$ddir"/f*.bin; do [ -f "$f" ] || continue
    [ "$(verify "$f" "$(sha256sum "$WORK/tksrc9/${f##*/}" | cut -d' ' -f1)")" = verified ] || bad=1; done
  local before2; before2=$(stors "$dlog")
  local out; out=$(copy --json -r -p 2 --concurrency 1 "$src" "$dst" 2>/dev/null) || true
  local skipped copied resumed
  skipped=$(echo "$out" | json skipped); copied=$(echo "$out" | json copied)
  resumed=$(echo "$out" | python3 -c 'import json,sys
try: print(sum(x["resumed_bytes"] for x in json.loads(sys.stdin.read())["records"]))
except Exception: print(0)')
  local sent; sent=$(stor_bytes "$dlog" | tail -n +$((before2 + 1)) | awk '{s += $1} END {print s + 0}')
  local again=$((sent - copied * size + held)) bound=$((size / 100 + 2 * 262144)) within=no
  [ "$resumed" -gt 0 ] && [ "$again" -ge 0 ] && [ "$again" -le "$bound" ] && within=yes
  local ok=0; for i in 0 1 2 3 4 5 6 7; do
    [ "$(verify "$ddir/f$i.bin" "$(sha256sum "$WORK/tksrc9/f$i.bin" | cut -d' ' -f1)")" = verified ] && ok=$((ok + 1)); done
  local v=BAD; [ "$ok" = 8 ] && [ "$bad" = 0 ] && [ "$skipped" = "$nd" ] && v=verified
  row "$r" "$name" "$v" "$size" "$resumed" "$again" "$bound" "$within" \
    "$nd complete at the kill, held $held, $skipped skipped, rerun sent $sent, $ok/8 verified"
  rm -rf "$ddir"
}
dl_stall() { # dl_stall ROUND: --timeout 3s, the path cut for 8 s: a clear error, then a rerun resumes
  local r=$1 dst="$WORK/dst/stall-$1.bin" part="$WORK/dst/.stall-$1.bin.drsftp-part"
  ip netns exec "$NS2" "$D" copy -q -p 2 --timeout 3s "$URL/src.bin" "$dst" >/dev/null 2>"$WORK/err.txt" &
  local c=$!; PIDS+=("$c")
  wait_ck "$part.ck" $((SIZE / 4)) "$c" || true
  cut_link 8
  if wait "$c"; then row "$r" dl-stall BAD "$SIZE" 0 0 0 no "rode out 8 s past a 3 s stall limit"; rm -f "$dst"; return; fi
  local e; e=$(tail -1 "$WORK/err.txt" | tr -d '",')
  local looks=no; [ -e "$dst" ] && looks=yes
  local again; again=$(again_of "$part" "$part.ck" "$WORK/root/src.bin" 2>/dev/null || echo -1)
  local out; out=$(copy --json -p 2 "$URL/src.bin" "$dst" 2>/dev/null) || true
  local resumed; resumed=$(echo "$out" | json resumed_bytes) bound=$((SIZE / 100 + 2 * 262144))
  local within=no; [ "$again" -ge 0 ] && [ "$again" -le "$bound" ] && [ "$resumed" -gt 0 ] && within=yes
  local v; v=$(verify "$dst" "$SUM"); [ "$looks" = yes ] && v=BAD
  row "$r" dl-stall "$v" "$SIZE" "$resumed" "$again" "$bound" "$within" "failed ($e), rerun"
  rm -f "$dst"
}

for r in $(seq "$ROUNDS"); do
  if want dl-kill-e; then resume_run "$r" dl-kill-e 2 client; fi
  if want dl-kill-s; then resume_run "$r" dl-kill-s 1 client; fi
  if want dl-srv-kill; then resume_run "$r" dl-srv-kill 2 server; fi

  if want dl-link-cut; then
  # Link cut for 5 s mid-file: TCP rides it out (the stall limit is 60 s).
  dst="$WORK/dst/cut-$r.bin"
  ip netns exec "$NS2" "$D" copy -q -p 2 "$URL/src.bin" "$dst" >/dev/null 2>"$WORK/err.txt" &
  c=$!; PIDS+=("$c")
  wait_ck "$WORK/dst/.cut-$r.bin.drsftp-part.ck" $((SIZE / 4)) "$c" || true
  cut_link
  if wait "$c"; then row "$r" dl-link-cut "$(verify "$dst" "$SUM")" "$SIZE" 0 0 0 - "rode out 5 s"
  else row "$r" dl-link-cut "clear-error" "$SIZE" 0 0 0 - "$(tail -1 "$WORK/err.txt" | tr -d '"')"; fi
  rm -f "$dst"
  fi

  if want dl-disk-full; then
  # Disk full at the destination.
  err=$(ip netns exec "$NS2" unshare -m sh -c "mkdir -p '$WORK/full' && mount -t tmpfs -o size=8m none '$WORK/full' && \
    '$D' copy -q -p 2 '$URL/src.bin' '$WORK/full/f.bin'; s=\$?; ls -A '$WORK/full' >'$WORK/full.ls'; exit \$s" 2>&1) \
    && row "$r" dl-disk-full BAD "$SIZE" 0 0 0 - "copy succeeded on a full disk" \
    || { if [ -s "$WORK/full.ls" ] && grep -qx 'f.bin' "$WORK/full.ls"; then row "$r" dl-disk-full BAD "$SIZE" 0 0 0 - "left f.bin";
         else row "$r" dl-disk-full clear-error "$SIZE" 0 0 0 - "$(echo "$err" | tail -1 | tr -d '"')"; fi; }
  fi
  if want dl-stall; then dl_stall "$r"; fi

  if want up-kill; then
  # Upload killed after 1 s, rerun.
  ip netns exec "$NS2" "$D" copy -q -p 2 "$WORK/root/src.bin" "$URL/up-$r.bin" >/dev/null 2>&1 &
  c=$!; PIDS+=("$c"); sleep 1; kill -9 "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true
  looks=no; [ -e "$WORK/root/up-$r.bin" ] && looks=yes
  out=$(copy --json -p 2 "$WORK/root/src.bin" "$URL/up-$r.bin" 2>/dev/null) || true
  v=$(verify "$WORK/root/up-$r.bin" "$SUM"); [ "$looks" = yes ] && v=BAD
  res=$(echo "$out" | json resumed_bytes); within=no; [ "$res" -gt 0 ] && within=yes
  row "$r" up-kill "$v" "$SIZE" "$res" - - "$within" "resumed from the kept partial (SITE PARTIAL)"
  rm -f "$WORK/root/up-$r.bin"
  fi
  if want up-srv-kill; then remote_resume "$r" up-srv-kill "$WORK/root/src.bin" S1 S1; fi
  if want up-link-cut; then cut_row "$r" up-link-cut "$WORK/root/src.bin" "$URL/cut-$r.bin" "$WORK/root/cut-$r.bin" "$WORK/root"; fi
  if want up-disk-full; then full_row "$r" up-disk-full "$WORK/root/src.bin"; fi

  if want up-kill-g; then
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
  fi

  if want up-srv-kill-g; then
  # Globus killed (daemon and session) at ~1/4 of an upload, restarted, rerun.
  g="$WORK/groot/gk-$r.bin"; gurl="ftp://$A1:$PORT3$g"
  XDG_STATE_HOME=$WORK/state ip netns exec "$NS2" "$D" copy -q -p 2 --retries 0 "$WORK/root/src.bin" "$gurl" \
    >/dev/null 2>&1 &
  c=$!; PIDS+=("$c")
  for _ in $(seq 3000); do [ -f "$g" ] && [ "$(stat -c %s "$g")" -ge $((SIZE / 4)) ] && break; kill -0 "$c" 2>/dev/null || break; sleep 0.01; done
  gkill; wait "$c" 2>/dev/null || true; gserve
  gheld=$(stat -c %s "$g" 2>/dev/null || echo 0)
  out=$(XDG_STATE_HOME=$WORK/state copy --json -p 2 "$WORK/root/src.bin" "$gurl" 2>"$WORK/err.txt") || true
  res=$(echo "$out" | json resumed_bytes); again=$((gheld - res)); bound=$((SIZE / 100 + 2 * 262144))
  within=no; [ "$res" -gt 0 ] && [ "$again" -le "$bound" ] && within=yes
  row "$r" up-srv-kill-g "$(verify "$g" "$SUM")" "$SIZE" "$res" "$again" "$bound" "$within" "Globus held $gheld after the kill"
  rm -f "$g"
  fi

  if want tree-delete; then
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
  fi
  if want tree-kill; then tree_kill "$r"; fi
  if want tree-kill-b; then tree_kill "$r" tree-kill-b 6; fi
  if want tree-up-kill; then
    tksrc tksrc9 9
    tree_remote_kill "$r" tree-up-kill "$WORK/tksrc9/" "$URL/tu$r/" "$WORK/root/tu$r" "$WORK/root" "$WORK/s1.xfer.jsonl"
  fi
  if want tree-3p-kill; then
    tksrc tksrc9 9; rm -rf "$WORK/root/t3s$r"; cp -r "$WORK/tksrc9" "$WORK/root/t3s$r"
    tree_remote_kill "$r" tree-3p-kill "$URL/t3s$r/" "ftp://$A2:$PORT2/t3$r/" "$WORK/root2/t3$r" "$WORK/root2" \
      "$WORK/s2.xfer.jsonl"
    rm -rf "$WORK/root/t3s$r"
  fi

  if want 3p-kill; then remote_resume "$r" 3p-kill "$URL/src.bin" client S2; fi
  if want 3p-dst-kill; then remote_resume "$r" 3p-dst-kill "$URL/src.bin" S2 S2; fi
  if want 3p-src-kill; then remote_resume "$r" 3p-src-kill "$URL/src.bin" S1 S2; fi
  if want 3p-link-cut; then
    cut_row "$r" 3p-link-cut "$URL/src.bin" "ftp://$A2:$PORT2/cut-$r.bin" "$WORK/root2/cut-$r.bin" "$WORK/root2"
  fi
  if want 3p-disk-full; then full_row "$r" 3p-disk-full "$URL/src.bin"; fi
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

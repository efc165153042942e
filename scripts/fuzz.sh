#!/usr/bin/env bash
# Runs the cargo-fuzz (libFuzzer) targets in fuzz/ for a bounded time each, starting from the committed seed
# corpora (copied, so a run never grows the tree), and prints per target: seconds, executions, CPU seconds,
# corpus size and crashes. Exits non-zero if any target crashed; the crashing input is kept in fuzz/artifacts/.
#   scripts/fuzz.sh                        every target, 10 s each (what CI runs, through scripts/test.sh)
#   scripts/fuzz.sh --secs 600 [TARGET..]  a longer run; --record writes it as a benchmark run folder
#                                          (bench/runs/<date>-<commit>-fuzz: command, machine, results.csv)
# libFuzzer's sanitizer flags are nightly-only; RUSTC_BOOTSTRAP=1 lets this machine's one stable toolchain take
# them (no other toolchain can be installed here).
set -euo pipefail
cd "$(dirname "$0")/.."
RECORD_ARGV=("$0" "$@")
secs=10; out=""; record=0; targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs=$2; shift 2;;
    --out) out=$2; shift 2;;
    --record) record=1; shift;;
    -h|--help) sed -n '2,9p' "$0"; exit 0;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2;;
    *) targets+=("$1"); shift;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(server_control client_reply mode_e_header blast_packet tls_records)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked >&2
export RUSTC_BOOTSTRAP=1
(cd fuzz && cargo fuzz build -O >&2)
work=$(mktemp -d /tmp/drsftp-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
table="| target | seconds | executions | CPU s | corpus in -> out | crashes |
|---|---|---|---|---|---|"
csv="target,seconds,executions,cpu_s,corpus_in,corpus_out,crashes"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp fuzz/corpus/"$t"/* "$work/$t/" 2>/dev/null || true
  n_in=$(ls "$work/$t" | wc -l)
  log="$work/$t.log"
  TIMEFORMAT='%U %S'
  set +e
  { time (cd fuzz && cargo fuzz run -O "$t" "$work/$t" -- -max_total_time="$secs" -print_final_stats=1 \
      -rss_limit_mb=2048 >"$log" 2>&1); } 2>"$work/$t.time"
  rc=$?
  set -e
  cpu=$(awk '{printf "%.1f", $1+$2}' "$work/$t.time")
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  n_out=$(ls "$work/$t" | wc -l)
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1; failed=1
    echo "fuzz.sh: $t FAILED (exit $rc); the input is in fuzz/artifacts/$t/:" >&2
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" >&2 || tail -20 "$log" >&2
  fi
  table+="
| $t | $secs | $runs | $cpu | $n_in -> $n_out | $crashes |"
  csv+="
$t,$secs,$runs,$cpu,$n_in,$n_out,$crashes"
done
echo "$table"
[ -z "$out" ] || printf '%s\n' "$table" >"$out"
if [ $record -eq 1 ]; then
  source bench/lib/record.sh
  printf '%s\n' "$csv" >"$work/results.csv"
  {
    echo "# Fuzzing run: every cargo-fuzz target for $secs s from the committed seed corpus"
    echo
    echo "libFuzzer, built by \`cargo fuzz build -O\` (release, debug assertions, ASan). One target at a time on one"
    echo "core; CPU seconds include the sanitizer's overhead. A crash would fail the run and keep its input in"
    echo "fuzz/artifacts/."
    echo
    printf '%s\n' "$table"
  } >"$work/report.md"
  record_run fuzz "$work/report.md" "$work/results.csv"
fi
exit $failed

# bench/lib/record.sh: building the benchmark binaries and writing run records, for the bench/*.sh drivers (bash;
# sourced, not run). A driver saves its command line first (RECORD_ARGV=("$0" "$@")) and, given --record, calls
# record_run at the end; the folder itself is written by `drsftp-bench record` (the same code as
# `drsftp-bench <harness> --record`):
#   bench/runs/<YYYY-MM-DD>-<shortcommit>-NAME/  command.txt  machine.txt  README.md (the report)  raw files
# Debug logs (server logs and the like) are never passed to record_run.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_TARGET=${CARGO_TARGET_DIR:-$BENCH_ROOT/target}
BENCH_BIN=${DRSFTP_BENCH_BIN:-$BENCH_TARGET/release/drsftp-bench}

# bench_build: release builds of the product and the harness binary.
bench_build() {
  (cd "$BENCH_ROOT" && cargo build --release -q -p drsftp -p drsftp-bench)
}

# record_run NAME REPORT [RAW...]: writes the run folder (command line from RECORD_ARGV) and prints its path.
record_run() {
  local name=$1 report=$2 f
  shift 2
  local raw=()
  for f in "$@"; do raw+=(--raw "$(realpath "$f")"); done
  [ -x "$BENCH_BIN" ] || (cd "$BENCH_ROOT" && cargo build --release -q -p drsftp-bench)
  report=$(realpath "$report")
  (cd "$BENCH_ROOT" && "$BENCH_BIN" record --runs-dir "$BENCH_ROOT/bench/runs" --name "$name" \
    --report "$report" "${raw[@]}" -- "${RECORD_ARGV[@]}")
}

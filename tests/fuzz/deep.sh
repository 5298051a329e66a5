#!/bin/bash
# deep.sh - fuzz every target at depth, one after the other, on one core.
#
# A benchmark-like program, not a test: neither CI (.ci/run keeps its short
# smoke) nor ctest runs it. It builds the fuzz targets if needed
# (build-fuzz, clang, -DEMBER_FUZZ=ON), then runs each target, single
# process, for RUNS executions (default 10 million) on a copy of its corpus
# (tests/fuzz/corpus/NAME) in a work dir, with crashes, leaks, timeouts and
# out-of-memory inputs written to an artifacts dir, and prints per target:
# executions, seconds, crashes found, and the artifacts' paths.
#
#   tests/fuzz/deep.sh [TARGET...]          all targets when none are named
#
# Environment:
#   RUNS=10000000      executions per target (-runs)
#   MAX_TIME=0         seconds per target at most (-max_total_time; 0: none):
#                      a cap for slow targets (fuzz_gam runs about 3,000
#                      inputs a second, fuzz_nam about 5,000)
#   SEED=              libFuzzer -seed (unset: a random one per target)
#   RSS_LIMIT_MB=2048  -rss_limit_mb
#   TIMEOUT=10         -timeout: seconds one input may take
#   OUT=build-fuzz/deep  where work/NAME (the grown corpus), artifacts/NAME
#                      and logs/NAME.log go; it is emptied for each target
#   BUILD=build-fuzz   the build directory
#
# A finding: reproduce it with build-fuzz/tests/fuzz/fuzz_NAME FILE, fix it,
# and keep FILE in tests/fuzz/corpus/NAME/ (regress-*), where CI's smoke
# and this script run it first. New corpus entries in OUT/work/NAME may be
# merged back with fuzz_NAME -merge=1 tests/fuzz/corpus/NAME OUT/work/NAME.
# Exit status: 0 when no target found anything, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-10000000}
MAX_TIME=${MAX_TIME:-0}
RSS_LIMIT_MB=${RSS_LIMIT_MB:-2048}
TIMEOUT=${TIMEOUT:-10}
BUILD=${BUILD:-build-fuzz}
OUT=${OUT:-$BUILD/deep}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
    -DEMBER_FUZZ=ON ${EMBER_CMAKE_ARGS:-} >/dev/null || exit 2
fi
# the targets: those named, else one per tests/fuzz/fuzz_*.c
names=()
if [ $# -gt 0 ]; then
  for t in "$@"; do names+=("fuzz_${t#fuzz_}"); done
else
  for src in tests/fuzz/fuzz_*.c; do names+=("$(basename "$src" .c)"); done
fi
# only the fuzz targets, one job: the machine is shared
cmake --build "$BUILD" -j"${JOBS:-1}" --target "${names[@]}" >/dev/null || {
  echo "deep.sh: the build failed" >&2
  exit 2
}
targets=()
for n in "${names[@]}"; do targets+=("$BUILD/tests/fuzz/$n"); done

found=0
printf '%-18s %12s %9s %8s  %s\n' target executions seconds crashes artifacts
for f in "${targets[@]}"; do
  [ -x "$f" ] && [ -f "$f" ] || { echo "deep.sh: no target $f" >&2; continue; }
  name=$(basename "$f")
  short=${name#fuzz_}
  work=$OUT/work/$short
  art=$OUT/artifacts/$short
  log=$OUT/logs/$short.log
  rm -rf "$work" "$art"
  mkdir -p "$work" "$art" "$OUT/logs"
  [ -d "tests/fuzz/corpus/$short" ] && cp -r "tests/fuzz/corpus/$short"/. "$work"/
  args=(-runs="$RUNS" -rss_limit_mb="$RSS_LIMIT_MB" -timeout="$TIMEOUT"
        -artifact_prefix="$art/" -print_final_stats=1)
  [ "$MAX_TIME" != 0 ] && args+=(-max_total_time="$MAX_TIME")
  [ -n "${SEED:-}" ] && args+=(-seed="$SEED")
  start=$(date +%s)
  "$f" "${args[@]}" "$work" >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  # libFuzzer stops at the first finding: the runs then end early
  crashes=$(find "$art" -type f | wc -l)
  [ "$crashes" -gt 0 ] || [ "$rc" -ne 0 ] && found=1
  printf '%-18s %12s %9s %8s  %s\n' "$name" "${execs:-?}" \
    "$((end - start))" "$crashes" \
    "$( [ "$crashes" -gt 0 ] && find "$art" -type f | tr '\n' ' ' ||
        { [ "$rc" -ne 0 ] && echo "exit $rc, see $log"; } )"
done
exit $found

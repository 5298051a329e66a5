#!/bin/sh
# lnl_budget.sh - what a budget of partials buffers costs `ember lnl`
# itself: plf_budget's data set (a 1,000-taxon Yule tree, DNA simulated
# along it under GTR+G4, the tree and all of its NNI neighbours) written as
# files (plf_budget --write), then scored by `ember lnl --embedded` with
# --max-vectors at 100% (n-1: what one full traversal holds), 50%, 25%,
# 10% and the minimum (ceil(log2 n) + 2). Prints per budget the scoring
# time ember lnl reports (best of REPEAT), relative to 100%, the vectors
# recomputed, and the largest relative difference of any tree's lnL from
# the 100% run. A benchmark: it asserts nothing.
#
#   tests/bench/lnl_budget.sh [TAXA] [SITES] [REPEAT]   (default 1000 1000 3;
#                                                        from the repository
#                                                        root, build/ built,
#                                                        or $BUILD)
set -eu
taxa=${1:-1000}
sites=${2:-1000}
repeat=${3:-3}
root=$(pwd)
build=${BUILD:-$root/build}
ember=$build/client/cli/ember
gen=$build/tests/bench/plf_budget
[ -x "$ember" ] && [ -x "$gen" ] || { echo "build ember and plf_budget first ($build)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$gen" --taxa "$taxa" --sites "$sites" --write "$tmp"
model=$(cat "$tmp/budget.model")
min=$(awk -v n="$taxa" 'BEGIN { k = 0; while (2 ^ k < n) k++; print k + 2 }')

# score VECTORS: best time (ms) and recomputed count over REPEAT runs
score() {
  best=
  for _ in $(seq "$repeat"); do
    "$ember" lnl --embedded --max-vectors "$1" --alignment "$tmp/budget.phy" \
      --trees "$tmp/budget.trees" --model "$model" \
      > "$tmp/out_$1.tsv" 2> "$tmp/err"
    ms=$(sed -n 's/.*, \([0-9.]*\) ms$/\1/p; s/.*, \([0-9.]*\) s$/\1e3/p' "$tmp/err")
    rec=$(sed -n 's/.*(\([0-9,]*\) recomputed).*/\1/p' "$tmp/err" | tr -d ,)
    if [ -z "$best" ] || awk -v a="$ms" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$ms
    fi
  done
  echo "$best $rec"
}

full=$((taxa - 1))
echo "ember lnl --embedded, $taxa taxa, $sites sites, $(wc -l < "$tmp/budget.trees") trees, best of $repeat ($(nproc) cores)"
printf '%-8s %8s %10s %8s %11s %9s\n' budget vectors time_ms time recomputed max_rel
for spec in "100% $full" "50% $((full / 2))" "25% $((full / 4))" "10% $((full / 10))" "min $min"; do
  set -- $spec
  v=$2
  [ "$v" -lt "$min" ] && v=$min
  set -- "$1" "$v" $(score "$v")
  [ "$1" = "100%" ] && base=$3
  rel=$(paste "$tmp/out_$full.tsv" "$tmp/out_$2.tsv" | awk 'NR > 1 {
    d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.1e", m }')
  printf '%-8s %8s %10s %+7.1f%% %11s %9s\n' "$1" "$2" "$3" \
    "$(awk -v a="$3" -v b="$base" 'BEGIN { print 100 * (a / b - 1) }')" "$4" "$rel"
done

#!/bin/sh
# beast_bench.sh - Debian's BEAST 1.10 (beast-mcmc, unchanged) on one of its
# own examples (from beast-mcmc-examples), run for NSTATES states with a
# fixed seed: with the system's libhmsbeagle, with libember-beagle embedded
# (`ember beagle --embedded`) and through one ember-nam (`ember beagle
# --nam`, warmed up by one short run first). Prints each run's wall time,
# BEAST's own time for the chain, its time per likelihood evaluation (its
# BeagleTreeLikelihood report; mostly partial traversals), and the final
# log line (the same seed gives the same chain). A benchmark: it asserts
# nothing. Examples:
#   strict      testStrictClock.xml: 34 taxa, 1,486 sites, HKY, strict clock
#   benchmark2  Benchmarks/benchmark2.xml: 62 taxa, 10,869 sites (5,565
#               patterns), GTR+G4: BEAST's benchmark size
#
#   tests/bench/beast_bench.sh [NSTATES [strict|benchmark2]]
#                         (default 20000 strict; from the repository root,
#                          build/ built, or $BUILD: another build tree)
set -eu
states=${1:-20000}
example=${2:-strict}
root=$(pwd)
build=${BUILD:-$root/build}
ember=$build/client/cli/ember
nam=$build/nam/ember-nam
case $example in
strict) xml=/usr/share/doc/beast-mcmc/examples/TestXML/ClockModels/testStrictClock.xml.gz ;;
benchmark2) xml=/usr/share/doc/beast-mcmc/examples/Benchmarks/benchmark2.xml.gz ;;
*) echo "example: strict or benchmark2"; exit 1 ;;
esac
command -v beast-mcmc >/dev/null || { echo "beast-mcmc is not installed"; exit 1; }
[ -f "$xml" ] || { echo "$xml: install beast-mcmc-examples"; exit 1; }
[ -x "$ember" ] && [ -x "$nam" ] || { echo "build ember first ($build)"; exit 1; }

tmp=$(mktemp -d)
nam_pid=
trap 'kill "$nam_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

setup() { # DIR NSTATES
  mkdir -p "$1"
  zcat "$xml" | sed -e "s/chainLength=\"[0-9]*\"/chainLength=\"$2\"/" \
    -e "s/logEvery=\"[0-9]*\"/logEvery=\"$2\"/g" > "$1/run.xml"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'; }

one() { # NAME DIR CMD...
  name=$1 dir=$2
  shift 2
  setup "$dir" "$states"
  t0=$(now)
  (cd "$dir" && "$@" beast-mcmc -beagle -beagle_double -seed 4242 -overwrite \
     run.xml > out.txt 2>&1)
  t1=$(now)
  chain=$(grep -E '^[0-9.]+ seconds' "$dir/out.txt" | tail -n 1 | cut -d' ' -f1)
  last=$(grep -E "^$states[[:space:]]" "$dir/out.txt" | tail -n 1 | tr -s ' \t' ' ')
  # BEAST's own report: "...(treeLikelihood)=N evaluations in S secs (E secs/eval)"
  eval=$(grep -o 'treeLikelihood)=[0-9]* evaluations in [0-9.E-]* secs ([0-9.E-]* secs/eval' \
           "$dir/out.txt" | tail -n 1 | sed 's/.*(\([0-9.E-]*\) secs\/eval/\1/')
  printf '%-28s %7.2f s  chain %7.2f s  %7.1f us/eval   %s\n' "$name" \
    "$(elapsed "$t0" "$t1")" "${chain:-0}" \
    "$(awk -v e="${eval:-0}" 'BEGIN { print e * 1e6 }')" "$last"
}

sock=$tmp/nam.sock
"$nam" --set "listen=unix:$sock" --set metrics_listen= > "$tmp/nam.log" 2>&1 &
nam_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
setup "$tmp/warm" 1000
(cd "$tmp/warm" && "$ember" beagle --nam "unix:$sock" -- beast-mcmc -beagle \
   -beagle_double -seed 4242 -overwrite run.xml > out.txt 2>&1)

echo "BEAST $(dpkg-query -W -f '${Version}' beast-mcmc 2>/dev/null) on $(basename "$xml" .gz), $states states ($(nproc) cores)"
one "Debian libhmsbeagle" "$tmp/sys"
one "libember-beagle, embedded" "$tmp/emb" "$ember" beagle --embedded --
one "libember-beagle, ember-nam" "$tmp/nam" "$ember" beagle --nam "unix:$sock" --

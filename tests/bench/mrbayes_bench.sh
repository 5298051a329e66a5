#!/bin/sh
# mrbayes_bench.sh - Debian's MrBayes (mb, unchanged) on primates.nex
# (12 taxa, 898 sites) or example.phy (17 taxa, 1,998 sites, 1,152
# patterns; made NEXUS here) with GTR+G, two chains and fixed seeds, timed
# with the system's libhmsbeagle,
# with libember-beagle embedded (`ember beagle --embedded`) and through one
# ember-nam (`ember beagle --nam`); then four mb processes at once, each on
# its own libhmsbeagle, against four sharing one ember-nam. Prints wall
# times and each run's final log-likelihood line (they must agree: the
# same seeds give the same chain). A benchmark: it asserts nothing.
#
#   tests/bench/mrbayes_bench.sh [NGEN [primates|example]]
#                         (default 20000 primates; from the repository root,
#                          build/ built, or $BUILD: another build tree)
set -eu
ngen=${1:-20000}
dataset=${2:-primates}
root=$(pwd)
build=${BUILD:-$root/build}
ember=$build/client/cli/ember
nam=$build/nam/ember-nam
case $dataset in
primates|example) ;;
*) echo "dataset: primates or example"; exit 1 ;;
esac
command -v mb >/dev/null || { echo "mb (mrbayes) is not installed"; exit 1; }
[ -x "$ember" ] && [ -x "$nam" ] || { echo "build ember first ($build)"; exit 1; }

tmp=$(mktemp -d)
trap 'kill "$nam_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
nam_pid=

# DIR/data.nex: the dataset as NEXUS
write_data() {
  if [ "$dataset" = primates ]; then
    cp "$root/tests/data/plf/primates.nex" "$1/data.nex"
    return
  fi
  awk 'NR == 1 { printf "#NEXUS\nbegin data;\n  dimensions ntax=%d nchar=%d;\n", $1, $2
                 print "  format datatype=dna missing=? gap=-;\n  matrix" ; next }
       NF { name = $1; $1 = ""; gsub(/ /, ""); print "  " name " " $0 }
       END { print "  ;\nend;" }' "$root/tests/data/plf/example.phy" > "$1/data.nex"
}

# setup DIR: mb's batch.nex and the data in DIR
setup() {
  mkdir -p "$1"
  write_data "$1"
  cat > "$1/batch.nex" <<NEX
begin mrbayes;
  set autoclose=yes nowarn=yes seed=12345 swapseed=54321 usebeagle=yes beagleprecision=double;
  execute data.nex;
  lset nst=6 rates=gamma;
  mcmc ngen=$ngen samplefreq=100 printfreq=$ngen nchains=2 nruns=1 diagnfreq=1000000;
  quit;
end;
NEX
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'; }

# the last chain line mb printed: generation and the two chains' lnL
last_line() { grep -E "^ +$ngen " "$1/out.txt" | tail -n 1 | tr -s ' '; }

one() { # NAME DIR CMD...
  name=$1 dir=$2
  shift 2
  setup "$dir"
  t0=$(now)
  (cd "$dir" && "$@" mb batch.nex > out.txt 2>&1)
  t1=$(now)
  printf '%-34s %8.2f s   %s\n' "$name" "$(elapsed "$t0" "$t1")" "$(last_line "$dir")"
}

sock=$tmp/nam.sock
"$nam" --set "listen=unix:$sock" --set metrics_listen= --set "cpu_workers=4" \
  > "$tmp/nam.log" 2>&1 &
nam_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

# A NAM serves for days: its first plf task on each platform (MrBayes's
# resource benchmark runs one on each) builds the OpenCL program and loads
# the emulated FPGA, once. One short run pays that before the timed ones.
setup "$tmp/warm"
sed -i 's/ngen=[0-9]*/ngen=100/' "$tmp/warm/batch.nex"
t0=$(now)
(cd "$tmp/warm" && "$ember" beagle --nam "unix:$sock" -- mb batch.nex > out.txt 2>&1)
echo "MrBayes 3.2.7a on $dataset, GTR+G, ngen=$ngen, 2 chains ($(nproc) cores)"
printf '%-34s %8.2f s   (ngen=100: the NAM'"'"'s first plf tasks)\n' "warm-up, ember-nam" "$(elapsed "$t0" "$(now)")"
one "Debian libhmsbeagle" "$tmp/sys"
one "libember-beagle, embedded" "$tmp/emb" "$ember" beagle --embedded --
one "libember-beagle, ember-nam" "$tmp/nam" "$ember" beagle --nam "unix:$sock" --

four() { # NAME CMD...
  name=$1
  shift
  for i in 1 2 3 4; do setup "$tmp/four$i"; done
  t0=$(now)
  pids=
  for i in 1 2 3 4; do
    (cd "$tmp/four$i" && "$@" mb batch.nex > out.txt 2>&1) &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; done
  t1=$(now)
  printf '%-34s %8.2f s   %s\n' "$name" "$(elapsed "$t0" "$t1")" "$(last_line "$tmp/four1")"
  rm -rf "$tmp"/four?
}
four "4 x mb, each its libhmsbeagle"
four "4 x mb, one ember-nam" "$ember" beagle --nam "unix:$sock" --

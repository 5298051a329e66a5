#!/bin/sh
# The main job: start ember-nam on a private socket with the example
# configuration (all three platform kinds: cpu, opencl through pocl, one
# emulated FPGA board), align the bundled real sequences through it with
# `ember align`, show where the tasks ran, how long each stage took and
# what each platform did (cache, reprograms, errors), score the fixed trees
# of a real alignment with `ember lnl` (the plf accelerator, also loaded on
# the emulated board), run a short MrBayes (Debian's mb, unchanged) with its
# likelihoods from the daemon through `ember beagle`, then stop the daemon
# (SIGTERM drains it). Then deploy/cluster.sh starts a local cluster (one
# ember-gam, two ember-nam), places two apps by label and shows `emberctl
# status`.
set -eu
cd "$(dirname "$0")/.."
BIN=build
DATA=tests/data/sw
WORK=$(mktemp -d /tmp/ember-demo.XXXXXX)
SOCK="$WORK/nam.sock"
FASHION=${EMBER_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
NAM_PID=""
cleanup() {
  if [ -n "$NAM_PID" ] && kill -0 "$NAM_PID" 2>/dev/null; then
    kill -TERM "$NAM_PID"; wait "$NAM_PID" || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
EMBER="$BIN/client/cli/ember"

echo "== starting ember-nam on unix:$SOCK (deploy/nam.conf.example)"
"$BIN/nam/ember-nam" --config deploy/nam.conf.example \
  --set "listen=unix:$SOCK" --set log_level=notice --set metrics_listen= \
  --set "opencl.cache_dir=$BIN/kernel-cache" &
NAM_PID=$!
# readiness: the daemon answers ListAccelerators once it is listening
tries=0
until "$EMBER" accelerators --nam "unix:$SOCK" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ $tries -gt 1200 ] || ! kill -0 "$NAM_PID" 2>/dev/null; then
    echo "demo: ember-nam did not come up" >&2; exit 1
  fi
  sleep 0.05
done

echo
echo "== ember accelerators"
"$EMBER" accelerators --nam "unix:$SOCK"

echo
echo "== 200 DNA reads on each platform kind, required with --platform"
echo "   (the first fpga-emu task loads the sw bitstream: 1.5 s)"
awk '/^>/ { n++ } n <= 200' "$DATA/dna_queries.fa" > "$WORK/q200.fa"
awk '/^>/ { n++ } n <= 200' "$DATA/dna_refs.fa" > "$WORK/r200.fa"
for kind in cpu opencl fpga-emu; do
  "$EMBER" align --nam "unix:$SOCK" --platform "$kind" \
    --query "$WORK/q200.fa" --ref "$WORK/r200.fa" --out "$WORK/dna_$kind.tsv"
done
if cmp -s "$WORK/dna_cpu.tsv" "$WORK/dna_opencl.tsv" &&
   cmp -s "$WORK/dna_cpu.tsv" "$WORK/dna_fpga-emu.tsv"; then
  echo "cpu, opencl and fpga-emu results are identical"
else
  echo "demo: the platforms disagree" >&2; exit 1
fi

echo
echo "== DNA: 150 bp reads against 300-600 bp windows of human EMBL entries"
echo "   (any platform: the NAM spreads tasks by expected finish time)"
"$EMBER" align --nam "unix:$SOCK" --timings \
  --query "$DATA/dna_queries.fa" --ref "$DATA/dna_refs.fa" --out "$WORK/dna.tsv"
head -n 6 "$WORK/dna.tsv" | column -t
echo "... $(($(wc -l < "$WORK/dna.tsv") - 1)) pairs in all"

echo
echo "== protein: 630 globins aligned in pairs (1st with 2nd, ...), BLOSUM62, gaps 11/1"
awk '/^>/ { n++ } n % 2 == 1' "$DATA/emboss_test_globins630.fa" > "$WORK/globins_a.fa"
awk '/^>/ { n++ } n % 2 == 0' "$DATA/emboss_test_globins630.fa" > "$WORK/globins_b.fa"
"$EMBER" align --nam "unix:$SOCK" --timings --protein \
  --query "$WORK/globins_a.fa" --ref "$WORK/globins_b.fa" --out "$WORK/prot.tsv"
head -n 6 "$WORK/prot.tsv" | column -t

echo
echo "== phylogenetic likelihood: IQ-TREE's example alignment (17 vertebrates x"
echo "   1998 sites of mtDNA), its tree, GTR+G4, scored by the plf accelerator"
PLF=tests/data/plf
GTRG='GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}'
"$EMBER" lnl --nam "unix:$SOCK" --alignment "$PLF/example.phy" \
  --trees "$PLF/example.tree" --model "$GTRG"
echo
echo "== the tree and one variant per branch (that branch 1.5 times longer):"
echo "   trees sharing most subtrees, on cpu with the default buffers and on"
echo "   fpga-emu with the fewest the planner takes (it recomputes vectors;"
echo "   the board loads the plf bitstream first: 1.5 s)"
awk '{ print; n = gsub(/:[0-9.]+/, "&");
  for (k = 1; k <= n; k++) { line = $0; out = ""; i = 0;
    while (match(line, /:[0-9.]+/)) { i++; v = substr(line, RSTART + 1, RLENGTH - 1);
      if (i == k) v = v * 1.5;
      out = out substr(line, 1, RSTART - 1) ":" v; line = substr(line, RSTART + RLENGTH) }
    print out line } }' "$PLF/example.tree" > "$WORK/example_variants.tree"
"$EMBER" lnl --nam "unix:$SOCK" --platform cpu --alignment "$PLF/example.phy" \
  --trees "$WORK/example_variants.tree" --model "$GTRG" > "$WORK/lnl_cpu.tsv"
"$EMBER" lnl --nam "unix:$SOCK" --platform fpga-emu --max-vectors 7 \
  --alignment "$PLF/example.phy" --trees "$WORK/example_variants.tree" \
  --model "$GTRG" > "$WORK/lnl_fpga.tsv"
head -n 6 "$WORK/lnl_cpu.tsv" | column -t
echo "... $(($(wc -l < "$WORK/lnl_cpu.tsv") - 1)) trees in all"
if cmp -s "$WORK/lnl_cpu.tsv" "$WORK/lnl_fpga.tsv"; then
  echo "cpu (default buffers) and fpga-emu (7 buffers) log-likelihoods are identical"
else
  echo "demo: the platforms disagree on the log-likelihoods" >&2; exit 1
fi

echo
echo "== MrBayes unchanged (Debian's mb) with every likelihood from ember-nam:"
echo "   \`ember beagle\` puts libember-beagle (BEAGLE's C API on the plf"
echo "   accelerator) first on its library path; primates.nex, GTR+G, fixed"
echo "   seeds, 2,000 generations, then the same run on Debian's libhmsbeagle"
mkdir -p "$WORK/mb_ember" "$WORK/mb_debian"
for dir in "$WORK/mb_ember" "$WORK/mb_debian"; do
  cp "$PLF/primates.nex" "$dir/"
  cat > "$dir/batch.nex" <<'NEX'
begin mrbayes;
  set autoclose=yes nowarn=yes seed=12345 swapseed=54321 usebeagle=yes beagleprecision=double;
  execute primates.nex;
  lset nst=6 rates=gamma;
  mcmc ngen=2000 samplefreq=100 printfreq=500 nchains=2 nruns=1 diagnfreq=1000000;
  quit;
end;
NEX
done
EMBER_ABS=$(cd "$(dirname "$EMBER")" && pwd)/ember
(cd "$WORK/mb_ember" &&
  "$EMBER_ABS" beagle --nam "unix:$SOCK" -- mb batch.nex > out.txt 2>&1) ||
  { tail -n 20 "$WORK/mb_ember/out.txt" >&2; echo "demo: mb through ember failed" >&2; exit 1; }
(cd "$WORK/mb_debian" && mb batch.nex > out.txt 2>&1) ||
  { tail -n 20 "$WORK/mb_debian/out.txt" >&2; echo "demo: mb failed" >&2; exit 1; }
grep -E 'Using BEAGLE' "$WORK/mb_ember/out.txt" | head -n 1 | sed 's/^ *//' || true
# generation and the two chains' log-likelihoods (not the time left)
chains() { grep -E '^ +[0-9]+ -- [[(]-' "$1" | sed 's/ -- [0-9:]* *$//' | tr -s ' '; }
echo "generation, the two chains' lnL (cold chain in brackets):"
chains "$WORK/mb_ember/out.txt"
if [ -n "$(chains "$WORK/mb_ember/out.txt")" ] &&
   [ "$(chains "$WORK/mb_ember/out.txt")" = "$(chains "$WORK/mb_debian/out.txt")" ]; then
  echo "every printed log-likelihood equals Debian's libhmsbeagle run"
else
  echo "demo: MrBayes through ember and on Debian's BEAGLE disagree" >&2; exit 1
fi

echo
echo "== CNN training (the cnn accelerator): the LeNet-like network shipped in"
echo "   accelerators/cnn/nets/lenet.cfg on Fashion-MNIST (Debian's"
echo "   dataset-fashion-mnist: 60,000 training and 10,000 test images), split"
echo "   in two stages by FPDeep's partitioner and trained for one epoch as a"
echo "   pipeline through ember-nam; each stage's weights live in a state block"
"$EMBER" train --nam "unix:$SOCK" --platform cpu --stages 2 --plan \
  --net accelerators/cnn/nets/lenet.cfg
"$EMBER" train --nam "unix:$SOCK" --platform cpu --stages 2 --epochs 1 \
  --net accelerators/cnn/nets/lenet.cfg --data "$FASHION" | tee "$WORK/train.txt"
acc=$(sed -n 's/^test accuracy //p' "$WORK/train.txt")
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }'; then
  echo "test accuracy after one epoch: $acc"
else
  echo "demo: test accuracy '$acc' after one epoch is below 0.8" >&2; exit 1
fi

echo
echo "== ember accelerators: what each platform did"
"$EMBER" accelerators --nam "unix:$SOCK"

echo
echo "== stopping ember-nam (SIGTERM drains in-flight tasks)"
kill -TERM "$NAM_PID"
wait "$NAM_PID"
NAM_PID=""

echo
echo "== a local cluster: one ember-gam, two ember-nam registered with it"
deploy/cluster.sh "$WORK/cluster"
echo "done"

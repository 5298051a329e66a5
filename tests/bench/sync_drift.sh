#!/bin/sh
# sync_drift.sh - how far `ember train --sync` over 2 and 4 stages drifts
# from 1-stage training after 100 SGD steps, set beside how far 1-stage
# training drifts from itself when oneDNN runs on 2 threads instead of 1.
# LeNet (accelerators/cnn/nets/lenet.cfg) on the first 2,000 Fashion-MNIST
# training images, one epoch of batch 20 in micro-batches of 10 (100
# steps), embedded on the cpu platform, for seeds 1..S (default 6). Per
# seed, the epoch's loss relative to the 1-stage run on 1 thread of:
#   whole-2, whole-4  stages of whole layers (--layers-only): the same
#                     arithmetic as one stage, so 0
#   plan-2, plan-4    the default plan (conv2 cut by output channels: the
#                     unit before sums the slices' input errors)
#   icp-2, icp-4      FPDeep's rule (--fixed-splits: conv2 cut by input
#                     channels, partial sums added along the chain)
#   threads-2         one stage, OMP_NUM_THREADS=2 (oneDNN splits its
#                     reductions over the threads: another sum order)
# A cut inside a layer adds in another order than the unsplit layer (one
# rounding apart), as do two threads. Training amplifies that in jumps
# (likely a ReLU or max-pool whose choice flips, which changes a gradient
# by a whole term): such runs land on a few trajectories per seed, the
# 2-thread run's among them. A benchmark: it asserts nothing.
#
#   tests/bench/sync_drift.sh [SEEDS] [DATA_DIR]   (from the repository
#                                                   root, build/ built, or
#                                                   $BUILD)
set -eu
seeds=${1:-6}
data=${2:-/usr/share/datasets/fashion-mnist}
root=$(pwd)
build=${BUILD:-$root/build}
ember=$build/client/cli/ember
net=$root/accelerators/cnn/nets/lenet.cfg
[ -x "$ember" ] || { echo "build ember first ($build)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# loss THREADS ARGS...: the epoch's loss of one --sync run
loss() {
  threads=$1
  shift
  OMP_NUM_THREADS=$threads "$ember" train --embedded --net "$net" \
    --data "$data" --train-limit 2000 --test-limit 20 --epochs 1 \
    --batch 20 --micro-batch 10 --sync --json "$@" >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; exit 1; }
  python3 -c 'import json,sys
print([json.loads(l) for l in open(sys.argv[1])][-1]["loss"])' "$tmp/out"
}

# rel A B: |B - A| / |A|
rel() {
  python3 -c 'import sys
a, b = map(float, sys.argv[1:])
print("%9.1e" % (abs(b - a) / abs(a)))' "$1" "$2"
}

echo "sync_drift: LeNet, 2000 Fashion-MNIST images, 100 steps of batch 20;"
echo "relative difference of the epoch's loss from 1 stage on 1 thread"
printf '%4s %12s %9s %9s %9s %9s %9s %9s %9s\n' seed loss whole-2 \
  whole-4 plan-2 plan-4 icp-2 icp-4 threads-2
s=1
while [ "$s" -le "$seeds" ]; do
  ref=$(loss 1 --seed "$s")
  row=$(printf '%4d %12.9f' "$s" "$ref")
  for args in "2 --layers-only" "4 --layers-only" "2" "4" \
      "2 --fixed-splits" "4 --fixed-splits"; do
    # shellcheck disable=SC2086 # split into the stage count and its flags
    set -- $args
    n=$1
    shift
    row="$row $(rel "$ref" "$(loss 1 --seed "$s" --stages "$n" "$@")")"
  done
  row="$row $(rel "$ref" "$(loss 2 --seed "$s")")"
  echo "$row"
  s=$((s + 1))
done

#!/bin/sh
# test_train_darknet_platforms.sh EMBER NAM SOURCE_DIR BINARY_DIR - `ember train` of
# accelerators/cnn/nets/darknet_small.cfg (darknet's small-classifier
# pattern: batch-normalized leaky convolutions, max-pools, dropout, a 1x1
# convolution, the global avgpool, softmax groups=1, subdivisions=2)
# through a real ember-nam (2 cpu workers, 4 emulated FPGA boards with the
# cnn bitstream, an OpenCL device when pocl has one) on every platform
# kind: the 200 training images of tests/data/cnn/small, batch 20 (so 2
# micro-batches of 10 from subdivisions), EPOCHS epochs, then the test
# pass over the 100 test images (an evaluation: the rolling statistics, no
# dropout). Each kind trains with seeds 1, 2 and 3 on one stage, and
# fpga-emu also over 2 boards (2 stages); every run's test accuracy must
# reach FLOOR (chance is 0.10). Under a sanitizer (EMBER_TEST_SANITIZED,
# 5-15 times slower) each path once: seed 1 alone, 3 epochs, and no floor:
# the sanitizers look for memory errors and races, the plain build checks
# what training reaches.
#
# FLOOR: the lowest test accuracy measured over seeds 1 to 8 on each kind
# (cpu and fpga-emu compute the same numbers; OpenCL sums in another
# order), less a margin for what other machines' rounding does to 20
# epochs of training on 200 images: measured 0.51 to 0.68 (README.md,
# "darknet's small classifiers"), floor 0.35.
#
# When this machine has an OpenCL device (opencl_devices.sh), the opencl
# platform must serve cnn, or the test fails; without one the test runs
# the rest and then exits 77, which ctest reports as skipped (cnn_kinds,
# train_nam.sh).
set -u
EMBER=$1
NAM=$2
SRC=$3
BIN=$4
NET=$SRC/accelerators/cnn/nets/darknet_small.cfg
DATA=$SRC/tests/data/cnn/small
EPOCHS=20
FLOOR=0.35
seeds="1 2 3"
if [ -n "${EMBER_TEST_SANITIZED:-}" ]; then
  EPOCHS=3 FLOOR=0 seeds=1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-train-darknet.XXXXXX") || exit 1
PIDS=""
cleanup() {
  for p in $PIDS; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset EMBER_NAM EMBER_RECONNECT_WINDOW_MS
failures=0

. "$(dirname "$0")/train_nam.sh"

SOCK=$WORK/nam.sock
start_nam "$SOCK" "$WORK/nam.log"
cnn_kinds

# run NAME KIND SEED [ARGS...]: train, then check the platform kind of
# every stage and the final test accuracy against FLOOR
run() {
  name=$1 kind=$2 seed=$3
  shift 3
  if ! "$EMBER" train --net "$NET" --data "$DATA" --epochs "$EPOCHS" \
      --batch 20 --seed "$seed" --nam "unix:$SOCK" --platform "$kind" \
      --json "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"; then
    echo "FAIL: $name: ember train failed:" >&2
    cat "$WORK/$name.err" >&2
    failures=$((failures + 1))
    return
  fi
  if ! python3 - "$WORK/$name.json" "$kind" "$FLOOR" "$name" <<'PY'
import json, sys
path, kind, floor, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), \
    sys.argv[4]
lines = [json.loads(l) for l in open(path)]
epochs = [o for o in lines if "epoch" in o]
final = lines[-1]
prefix = {"cpu": "cpu", "fpga-emu": "fpga", "opencl": "opencl"}[kind]
plats = [s["platform"] for s in epochs[0]["stages"]]
ok = all(p.startswith(prefix) for p in plats)
acc = final["test_accuracy"]
print("  %s: %s, loss %.4f -> %.4f, train %.2f, test accuracy %.2f "
      "(floor %.2f)" % (name, " ".join(plats), epochs[0]["loss"],
                        epochs[-1]["loss"], epochs[-1]["train_accuracy"],
                        acc, floor))
if not ok:
    print("FAIL: %s ran on %s, not %s" % (name, plats, kind))
sys.exit(0 if ok and acc >= floor and
         (floor == 0 or epochs[-1]["loss"] < epochs[0]["loss"]) else 1)
PY
  then
    echo "FAIL: $name: test accuracy under $FLOOR or not on $kind" >&2
    failures=$((failures + 1))
  fi
}

for kind in $kinds; do
  for seed in $seeds; do
    run "$kind-$seed" "$kind" "$seed"
  done
done
# two boards, a stage each (batch-normalized layers stay whole)
run fpga-emu-2stages fpga-emu 1 --stages 2

[ $failures -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
echo "darknet_small trained on: $kinds"
[ $opencl_missing -eq 0 ] || exit 77

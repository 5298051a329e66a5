#!/bin/sh
# train_bench.sh - what `ember train` achieves: LeNet
# (accelerators/cnn/nets/lenet.cfg) on Fashion-MNIST (Debian's
# dataset-fashion-mnist), one epoch over the first N training images
# (default 12,800) with the full test pass, side by side in one run:
#   embedded   in-process, 1 and 2 stages
#   daemon     through one ember-nam on a unix socket, cpu, 1 and 2 stages
#   fpga-emu   1, 2 and 4 stages, each on its own emulated board (FPDeep's
#              1157 GOPS per FPGA as the model; the results are computed by
#              this machine's CPU, so wall time is bounded by its cores)
#   slow fpga  the same on boards modelled at 0.65 GOPS (fpga-emu.timing
#              cnn:13:50, 1780 times slower than FPDeep's), so that each
#              board's model, not the shared cores, sets the pace: what
#              the pipeline's balance and overlap achieve over separate
#              devices (FPDeep's figure: idle under 5%, scaling near-linear).
#              At 1.3 GOPS the first board's CPU work (conv1 over one input
#              channel, pool1) outlasted its model time 3% of the time on
#              2 shared cores; at 0.65 GOPS 0.2%
#   two NAMs   2 stages, one on each of two ember-nam on TCP loopback
#              (activations and errors through the client), on cpu and on
#              the slow boards (2 and 4 stages, half on each NAM)
# Prints per run images per second, each stage's busy share (its tasks'
# platform time over the epoch's wall time), the stages' mean idle share
# (FPDeep's proportion of idle stages) and the plan's expected idle.
# A benchmark: it asserts nothing.
#
#   tests/bench/train_bench.sh [N] [DATA_DIR]   (from the repository root,
#                                                build/ built, or $BUILD)
set -eu
n=${1:-12800}
data=${2:-/usr/share/datasets/fashion-mnist}
root=$(pwd)
build=${BUILD:-$root/build}
ember=$build/client/cli/ember
nam=$build/nam/ember-nam
net=$root/accelerators/cnn/nets/lenet.cfg
[ -x "$ember" ] && [ -x "$nam" ] || { echo "build ember and ember-nam first ($build)"; exit 1; }
tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

start_nam() { # address log [--set ITEM]...
  addr=$1
  log=$2
  shift 2
  "$nam" --config "$root/deploy/nam.conf.example" --set "listen=$addr" \
    --set log_level=warning --set metrics_listen= --set cpu_workers=4 \
    --set opencl.enabled=false --set fpga-emu.boards=4 \
    --set "fpga-emu.bitstreams=cnn" --set fpga-emu.reprogram_time=0 "$@" \
    >"$log" 2>&1 &
  pids="$pids $!"
  i=0
  until "$ember" accelerators --nam "$addr" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 600 ] || { cat "$log"; exit 1; }
    sleep 0.05
  done
}

# run NAME ARGS...: one epoch, its figures as a table row
run() {
  name=$1
  shift
  "$ember" train --net "$net" "$@" --plan > "$tmp/plan" 2>&1 || true
  idle=$(awk '$1 ~ /^[0-9]+$/ { printf "%s%s", sep, $NF; sep = " " }' "$tmp/plan")
  "$ember" train --net "$net" --data "$data" --epochs 1 --train-limit "$n" \
    --json "$@" > "$tmp/out.json" 2> "$tmp/err" ||
    { echo "$name: failed"; cat "$tmp/err"; return 0; }
  python3 - "$tmp/out.json" "$name" "$idle" <<'PY'
import json, sys
o = [json.loads(l) for l in open(sys.argv[1])][0]
busy = " ".join("%3.0f%%" % (100 * s["busy"]) for s in o["stages"])
idle = max(0.0, 100 * (1 - sum(s["busy"] for s in o["stages"]) / len(o["stages"])))
plat = ",".join(s["platform"] for s in o["stages"])
print("%-22s %-24s %8.0f  %6.2f%%  %-22s %5.1f%%  %s"
      % (sys.argv[2], plat[:24], o["images_per_second"],
         100 * o["test_accuracy"], busy, idle, sys.argv[3]))
PY
}

start_nam "unix:$tmp/nam.sock" "$tmp/nam.log"
start_nam "tcp:127.0.0.1:47811" "$tmp/nam2.log"
start_nam "tcp:127.0.0.1:47812" "$tmp/nam3.log"
start_nam "unix:$tmp/slow.sock" "$tmp/slow.log" --set fpga-emu.timing=cnn:13:50
start_nam "tcp:127.0.0.1:47813" "$tmp/slow2.log" --set fpga-emu.timing=cnn:13:50
start_nam "tcp:127.0.0.1:47814" "$tmp/slow3.log" --set fpga-emu.timing=cnn:13:50
echo "LeNet, one epoch of $n Fashion-MNIST training images (batch 64, micro-batches of 16), then 10,000 test images"
echo "$(nproc) cores: $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)"
printf "%-22s %-24s %8s  %7s  %-22s %6s  %s\n" run platforms img/s "test" "busy per stage" "idle" "planned idle per stage"
for s in 1 2; do
  run "embedded, $s stage(s)" --embedded --stages "$s"
done
for s in 1 2; do
  run "daemon cpu, $s stage(s)" --nam "unix:$tmp/nam.sock" --platform cpu --stages "$s"
done
for s in 1 2 4; do
  run "fpga-emu, $s stage(s)" --nam "unix:$tmp/nam.sock" --platform fpga-emu --stages "$s"
done
# the slow boards' epoch: the first N/2 training images, 640 test images
for s in 1 2 4; do
  run "slow fpga, $s stage(s)" --nam "unix:$tmp/slow.sock" --platform fpga-emu \
    --stages "$s" --train-limit $((n / 2)) --test-limit 640
done
run "two NAMs (tcp), 2 stages" --nam tcp:127.0.0.1:47811 --nam tcp:127.0.0.1:47812 \
  --platform cpu --stages 2
# the slow boards over two NAMs: half the stages on each, activations and
# errors between them through this client
for s in 2 4; do
  run "slow, two NAMs, $s st." --nam tcp:127.0.0.1:47813 --nam tcp:127.0.0.1:47814 \
    --platform fpga-emu --stages "$s" --train-limit $((n / 2)) --test-limit 640
done

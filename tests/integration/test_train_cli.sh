#!/bin/sh
# test_train_cli.sh EMBER SOURCE_DIR - `ember train` end to end, embedded
# (no daemon), on LeNet (accelerators/cnn/nets/lenet.cfg) and the 200
# training and 100 test images of tests/data/cnn/small.
#
#   usage      --help and `ember help train`; bad combinations exit 2 with
#              a message naming the options (no --net, no --data, --gam
#              without --nodes, --nodes without --gam, --nam with
#              --embedded, --gam with --embedded, --epochs 0 without
#              --load, a --micro-batch that does not divide --batch, an
#              unknown --platform, a --lr that is not a number)
#   files      a missing .cfg, --data directory or --load file: exit 1,
#              the message names the path; --plot without gnuplot in
#              $PATH fails before training
# These need libember's real ember_train / ember_train_plan
# (client/lib/train.c), not only the command:
#   train      one epoch prints "epoch 1/1 ... test NN.NN% ..." and
#              "test accuracy 0.NNNN"
#   json       --json: every line parses, the epoch's keys are there, the
#              last object has test_accuracy
#   learns     5 epochs on the 200 images reach test accuracy 0.55 and
#              training accuracy 0.65 (chance 0.10), the loss halved
#   plan       --plan --stages 2 --embedded prints a plan, without --data
#   save/load  --save writes the weights; --load them with --epochs 0
#              evaluates them: the last epoch's test accuracy again
#   plot       --plot writes a PNG (gnuplot-nox, which deploy/setup.sh
#              installs; without it this fails)
# Every check prints what it compared when it fails; the script exits 1
# if any failed.
set -u
EMBER=$1
SRC=$2
NET=$SRC/accelerators/cnn/nets/lenet.cfg
DATA=$SRC/tests/data/cnn/small
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-train-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
unset EMBER_NAM EMBER_RECONNECT_WINDOW_MS

failures=0
checks=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*" >&2
}

# run ARGS...: ember train with stdout in $WORK/out, stderr in $WORK/err
run() {
  "$EMBER" train "$@" </dev/null >"$WORK/out" 2>"$WORK/err"
  rc=$?
  last="ember train $*"
}

show() { # what, file
  echo "    $1:" >&2
  sed 's/^/    /' "$2" >&2
}

# expect CODE TEXT ARGS...: exit status CODE and TEXT in stderr
expect() {
  want=$1 text=$2
  shift 2
  checks=$((checks + 1))
  run "$@"
  if [ "$rc" -ne "$want" ]; then
    fail "$last: exit status $rc, expected $want"
    show stderr "$WORK/err"
  elif [ -n "$text" ] && ! grep -qF -- "$text" "$WORK/err"; then
    fail "$last: stderr lacks '$text'"
    show stderr "$WORK/err"
  fi
}

# ---- usage ------------------------------------------------------------------
checks=$((checks + 1))
if ! "$EMBER" train --help >"$WORK/help" 2>"$WORK/err"; then
  fail "ember train --help: exit status $?"
elif ! grep -q '^Usage: ember train --net FILE --data DIR' "$WORK/help" ||
  ! grep -q -- '--micro-batch M' "$WORK/help" ||
  ! grep -q -- '--plot FILE.png' "$WORK/help"; then
  fail "ember train --help lacks the usage line or options"
  show stdout "$WORK/help"
fi
checks=$((checks + 1))
"$EMBER" help train >"$WORK/help2" && cmp -s "$WORK/help" "$WORK/help2" ||
  fail "ember help train differs from ember train --help"
checks=$((checks + 1))
"$EMBER" --help | grep -q '^  train ' || fail "ember --help lacks train"

expect 2 "--net FILE is required"
expect 2 "--net FILE is required" --data "$DATA" --embedded
expect 2 "--data DIR is required" --net "$NET" --embedded
expect 2 "--gam needs --nodes" --net "$NET" --data "$DATA" --gam 127.0.0.1:1
expect 2 "--nodes is what to ask the GAM for" --net "$NET" --data "$DATA" \
  --nodes 2 --stages 2
expect 2 "--nam and --embedded exclude each other" --net "$NET" \
  --data "$DATA" --nam "unix:$WORK/none.sock" --embedded
expect 2 "--gam excludes --nam and --embedded" --net "$NET" --data "$DATA" \
  --gam 127.0.0.1:1 --nodes 1 --embedded
expect 2 "--gam excludes --nam and --embedded" --net "$NET" --data "$DATA" \
  --gam 127.0.0.1:1 --nodes 1 --nam "unix:$WORK/none.sock"
expect 2 "--nodes 3 is more than the 2 stages" --net "$NET" --data "$DATA" \
  --gam 127.0.0.1:1 --nodes 3 --stages 2
expect 2 "--epochs 0 evaluates --load's weights" --net "$NET" --data "$DATA" \
  --embedded --epochs 0
expect 2 "--micro-batch 3 does not divide --batch 20" --net "$NET" \
  --data "$DATA" --embedded --batch 20 --micro-batch 3
expect 2 "--platform: unknown kind 'gpu'" --net "$NET" --data "$DATA" \
  --embedded --platform gpu
expect 2 "--lr: 'fast' is not a number" --net "$NET" --data "$DATA" \
  --embedded --lr fast
expect 2 "unknown option '--epoch-count'" --net "$NET" --data "$DATA" \
  --epoch-count 2
expect 2 "--plan trains nothing" --net "$NET" --plan --embedded \
  --plot "$WORK/x.png"

# ---- files ------------------------------------------------------------------
expect 1 "--net: cannot read '$WORK/no-such.cfg'" --net "$WORK/no-such.cfg" \
  --data "$DATA" --embedded
expect 1 "--data: cannot read '$WORK/no-such-dir'" --net "$NET" \
  --data "$WORK/no-such-dir" --embedded
expect 1 "--load: cannot read '$WORK/no-such.weights'" --net "$NET" \
  --data "$DATA" --embedded --load "$WORK/no-such.weights" --epochs 0
checks=$((checks + 1))
PATH=$WORK/empty-path "$EMBER" train --net "$NET" --data "$DATA" --embedded \
  --plot "$WORK/nope.png" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ "$rc" -ne 1 ] || ! grep -qF "gnuplot is not installed" "$WORK/err" ||
  grep -q '^epoch' "$WORK/out"; then
  fail "--plot without gnuplot: exit status $rc (expected 1, before training)"
  show stderr "$WORK/err"
fi

# ---- training: these need the real ember_train (client/lib/train.c) ---------
SMALL="--net $NET --data $DATA --embedded --epochs 1 --train-limit 100
  --test-limit 100 --batch 20"

# train
# shellcheck disable=SC2086 # SMALL is a list of words (no spaces in paths)
expect 0 "" $SMALL
if [ "$rc" -eq 0 ]; then
  checks=$((checks + 1))
  line='^epoch 1/1  loss [0-9.]+  train [0-9.]+%  test [0-9.]+%  [0-9]+ img/s'
  if ! grep -Eq "$line  busy [0-9]+%\$" "$WORK/out" ||
    ! grep -Eq '^test accuracy [01]\.[0-9]{4}$' "$WORK/out"; then
    fail "$last: no epoch line or test accuracy"
    show stdout "$WORK/out"
  fi
fi

# json
# shellcheck disable=SC2086
expect 0 "" $SMALL --json
if [ "$rc" -eq 0 ]; then
  checks=$((checks + 1))
  python3 - "$WORK/out" <<'PY' || fail "$last: the JSON lines (above)"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert len(objs) == 2, lines
e = objs[0]
for k in ("epoch", "epochs", "loss", "train_accuracy", "test_accuracy",
          "seconds", "images_per_second", "stages"):
    assert k in e, (k, e)
assert e["epoch"] == 1 and e["epochs"] == 1, e
assert 0 <= e["test_accuracy"] <= 1, e
assert len(e["stages"]) == 1 and "platform" in e["stages"][0] \
    and "busy" in e["stages"][0], e
assert "test_accuracy" in objs[1] and 0 <= objs[1]["test_accuracy"] <= 1, objs
PY
fi

# learns: 5 epochs over the 200 training images (10 updates each), seeds 1
# to 8 seen at test accuracy 0.63 to 0.71 and training accuracy 0.76 to
# 0.87 (chance: 0.10), the loss from about 2.3 down to 0.44 to 0.73
expect 0 "" --net "$NET" --data "$DATA" --embedded --epochs 5 --batch 20 \
  --seed 1 --json
if [ "$rc" -eq 0 ]; then
  checks=$((checks + 1))
  python3 - "$WORK/out" <<'PY' || fail "$last: did not learn (above)"
import json, sys
epochs = [json.loads(l) for l in open(sys.argv[1]) if '"epoch"' in l]
assert len(epochs) == 5, epochs
first, last = epochs[0], epochs[-1]
print("  5 epochs: loss %.4f -> %.4f, train %.2f, test %.2f"
      % (first["loss"], last["loss"], last["train_accuracy"],
         last["test_accuracy"]))
assert last["test_accuracy"] >= 0.55, last
assert last["train_accuracy"] >= 0.65, last
assert last["loss"] < 0.5 * first["loss"], (first, last)
PY
fi

# plan (no --data needed)
expect 0 "" --net "$NET" --plan --stages 2 --embedded
if [ "$rc" -eq 0 ] && [ ! -s "$WORK/out" ]; then
  fail "$last: no plan on standard output"
fi

# save, then load and evaluate: the loaded weights score the test images
# as the last epoch did
# shellcheck disable=SC2086
expect 0 "" $SMALL --save "$WORK/lenet.weights"
if [ "$rc" -eq 0 ]; then
  checks=$((checks + 1))
  [ -s "$WORK/lenet.weights" ] || fail "$last: no weights file written"
  trained=$(sed -n 's/^test accuracy //p' "$WORK/out")
  expect 0 "" --net "$NET" --data "$DATA" --embedded --test-limit 100 \
    --load "$WORK/lenet.weights" --epochs 0
  if [ "$rc" -eq 0 ] && ! grep -Eq '^test accuracy [01]\.[0-9]{4}$' "$WORK/out"; then
    fail "$last: no test accuracy"
    show stdout "$WORK/out"
  elif [ "$rc" -eq 0 ] &&
       [ "$(sed -n 's/^test accuracy //p' "$WORK/out")" != "$trained" ]; then
    fail "$last: the loaded weights score $(sed -n 's/^test accuracy //p' "$WORK/out"), training ended at $trained"
  fi
fi

# plot (gnuplot-nox: deploy/setup.sh installs it)
# shellcheck disable=SC2086
expect 0 "" $SMALL --epochs 2 --plot "$WORK/train.png"
if [ "$rc" -eq 0 ]; then
  checks=$((checks + 1))
  magic=$(od -An -tx1 -N8 "$WORK/train.png" 2>/dev/null | tr -d ' \n')
  [ "$magic" = 89504e470d0a1a0a ] || fail "$last: $WORK/train.png is no PNG"
fi

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]

# train_runs.sh - what the `ember train` tests through daemons share;
# sourced with EMBER, NET, DATA, WORK and EPOCHS set. Gives losses and
# train; a failed run counts in failures.

# losses FILE: the epochs' losses of an `ember train --json` run, one a line
losses() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "epoch" in o and "loss" in o: print(repr(o["loss"]))' "$1"
}

# train NAME ARGS...: a --sync run of EPOCHS epochs on DATA (batch 20 in
# micro-batches of 10, tested on 20 images), its --json output in
# $WORK/NAME.json, its losses in $WORK/NAME.loss
train() {
  name=$1
  shift
  if ! "$EMBER" train --net "$NET" --data "$DATA" --epochs "$EPOCHS" \
      --batch 20 --micro-batch 10 --test-limit 20 --sync --seed 3 --json \
      "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"; then
    echo "FAIL: ember train $*:" >&2
    cat "$WORK/$name.err" >&2
    failures=$((failures + 1))
    return 1
  fi
  losses "$WORK/$name.json" >"$WORK/$name.loss"
}

#!/bin/sh
# test_train_gam.sh EMBER EMBERCTL EMBER_GAM EMBER_NAM SOURCE_DIR - `ember
# train --gam HOST:PORT --nodes N` end to end: a real ember-gam and two
# real ember-nam (cpu only, registered with the GAM, the cnn label
# advertised); the GAM places the app on both nodes, the stages are dealt
# over them and activations and errors pass through the client. LeNet on
# the 200 training images of tests/data/cnn/small, --sync, 3 epochs
# (30 SGD steps): over 2 nodes with whole-layer stages the losses equal a
# 1-stage run on one NAM bit for bit, and both NAMs ran cnn tasks; the
# default plan (ICP cut inside a layer): the first epoch within 1e-4. Asking for more
# nodes than serve cnn fails with the GAM's answer, never hangs.
set -u
EMBER=$1
CTL=$2
GAM=$3
NAM=$4
SRC=$5
NET=$SRC/accelerators/cnn/nets/lenet.cfg
DATA=$SRC/tests/data/cnn/small
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-train-gam.XXXXXX") || exit 1
PIDS=""
cleanup() {
  for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset EMBER_NAM EMBER_RECONNECT_WINDOW_MS
failures=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*" >&2
}

. "$(dirname "$0")/wait_helpers.sh"

# ---- one GAM, two NAMs serving cnn ------------------------------------------
(umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$WORK/gam.token")
"$GAM" --create-key "$WORK/cluster.key" || exit 1
GAM_PORT=$(port)
ADMIN_PORT=$(port)
"$GAM" --set "listen=127.0.0.1:$GAM_PORT" --set "admin_listen=127.0.0.1:$ADMIN_PORT" \
  --set "cluster_key_file=$WORK/cluster.key" --set "admin_token_file=$WORK/gam.token" \
  --set "database=$WORK/gam.db" --set heartbeat_interval=200ms \
  --set acquire_timeout=3s 2>"$WORK/gam.log" &
PIDS=$!
for n in 1 2; do
  OMP_NUM_THREADS=1 "$NAM" --config "$SRC/deploy/nam.conf.example" \
    --set "listen=unix:$WORK/n$n.sock, tcp:127.0.0.1:$(port)" \
    --set "node_name=n$n" --set "gam=127.0.0.1:$GAM_PORT" \
    --set "cluster_key_file=$WORK/cluster.key" --set metrics_listen= \
    --set opencl.enabled=false --set fpga-emu.boards=0 --set cpu_workers=2 \
    --set heartbeat_interval=200ms --set log_level=notice \
    2>"$WORK/n$n.log" >&2 &
  PIDS="$PIDS $!"
done
both_up() {
  "$CTL" --gam "http://127.0.0.1:$ADMIN_PORT" --json nodes | python3 -c '
import json, sys
n = json.load(sys.stdin)["nodes"]
sys.exit(0 if sum(x["state"] == "up" and x["heartbeats"] > 0 and
                  "cnn" in x.get("labels", []) for x in n) == 2 else 1)'
}
if ! until_ok 600 both_up; then
  echo "the NAMs did not register with cnn:" >&2
  "$CTL" --gam "http://127.0.0.1:$ADMIN_PORT" --json nodes >&2
  cat "$WORK/gam.log" "$WORK"/n*.log >&2
  exit 1
fi

EPOCHS=3
. "$(dirname "$0")/train_runs.sh"

# same A B TOL [EPOCHS]: the loss of run B's first EPOCHS (3) epochs within
# TOL relative of A's
same() {
  python3 - "$WORK/$1.loss" "$WORK/$2.loss" "$3" "${4:-3}" <<'PY' || fail "$2 differs from $1"
import sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
assert len(a) == len(b) == 3, (len(a), len(b))
n = int(sys.argv[4])
rel = max(abs(x - y) / abs(x) for x, y in zip(a[:n], b[:n]))
print("  %s vs %s: largest relative loss difference over %d epochs %.2e"
      % (sys.argv[2].split("/")[-1][:-5], sys.argv[1].split("/")[-1][:-5], n,
         rel))
sys.exit(0 if rel <= float(sys.argv[3]) else 1)
PY
}

# cnn_done SOCKET: the cnn tasks the NAM's cpu has completed
cnn_done() {
  "$EMBER" accelerators --nam "unix:$1" |
    awk '$1 == "cpu" && $2 == "cnn" { for (i = 3; i < NF; i++) if ($i == "done") print $(i + 1) }'
}

train one-node --nam "unix:$WORK/n1.sock" --stages 1 --layers-only
before1=$(cnn_done "$WORK/n1.sock")
before2=$(cnn_done "$WORK/n2.sock")
train gam-layers --gam "127.0.0.1:$GAM_PORT" --nodes 2 --stages 2 --layers-only &&
  same one-node gam-layers 0
after1=$(cnn_done "$WORK/n1.sock")
after2=$(cnn_done "$WORK/n2.sock")
echo "  cnn tasks on n1: $before1 -> $after1, on n2: $before2 -> $after2"
[ "${after1:-0}" -gt "${before1:-0}" ] && [ "${after2:-0}" -gt "${before2:-0}" ] ||
  fail "the stages did not run on both nodes (n1 $before1 -> $after1, n2 $before2 -> $after2)"
# the cut inside a layer depends on the nodes' measured speeds; partial
# sums in another order, which training amplifies (test_train_platforms):
# the first epoch within 1e-4
train gam-icp --gam "127.0.0.1:$GAM_PORT" --nodes 2 --stages 2 &&
  same one-node gam-icp 1e-4 1

# three nodes wanted, two serve cnn: the GAM's answer, within its timeout
"$EMBER" train --net "$NET" --data "$DATA" --epochs 1 --stages 3 --nodes 3 \
  --gam "127.0.0.1:$GAM_PORT" >"$WORK/three.out" 2>"$WORK/three.err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "ember: train: .*GAM" "$WORK/three.err"; then
  fail "--nodes 3 with two cnn nodes: exit $rc, $(cat "$WORK/three.err")"
fi

[ $failures -eq 0 ] || { echo "$failures failures" >&2; exit 1; }
echo "ember train over the GAM's nodes equals one node"

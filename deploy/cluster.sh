#!/bin/sh
# A local cluster: one ember-gam and two ember-nam on loopback, sharing a
# fresh cluster key; the NAMs register and heartbeat, an admin adds labels
# with emberctl, `ember align --gam` runs an app on the node the GAM
# places it on (a signed lease, then tasks over TCP), and `emberctl
# status`, `nodes` and `events` show the cluster (labels, heartbeats,
# load, bitstreams, the app's lease). Everything stops at the end.
# Usage: deploy/cluster.sh [WORKDIR]   (default: a fresh temporary one)
set -eu
cd "$(dirname "$0")/.."
BIN=build
WORK=${1:-$(mktemp -d /tmp/ember-cluster.XXXXXX)}
mkdir -p "$WORK"
GAM="$BIN/gam/ember-gam"
NAM="$BIN/nam/ember-nam"
CTL="$BIN/client/ctl/emberctl"
EMBER="$BIN/client/cli/ember"
DATA=tests/data/sw
PIDS=""
cleanup() {
  for p in $PIDS; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GAM_PORT=$(port); ADMIN_PORT=$(port)
export EMBER_GAM_ADMIN="http://127.0.0.1:$ADMIN_PORT"   # emberctl
export EMBER_GAM="127.0.0.1:$GAM_PORT"                  # libember's apps
export EMBER_GAM_TOKEN_FILE="$WORK/gam.token"

rm -f "$WORK/cluster.key"
"$GAM" --create-key "$WORK/cluster.key"
(umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/gam.token")

echo "-- ember-gam on $EMBER_GAM, admin API on $EMBER_GAM_ADMIN"
"$GAM" --set "listen=127.0.0.1:$GAM_PORT" --set "admin_listen=127.0.0.1:$ADMIN_PORT" \
  --set "cluster_key_file=$WORK/cluster.key" --set "admin_token_file=$WORK/gam.token" \
  --set "database=$WORK/gam.db" --set log_level=notice 2> "$WORK/gam.log" &
PIDS="$!"

for n in 1 2; do
  tcp=$(port)
  extra=""
  [ "$n" = 2 ] && extra="--label big-memory"
  echo "-- ember-nam n$n (tcp:127.0.0.1:$tcp)"
  # shellcheck disable=SC2086
  "$NAM" --config deploy/nam.conf.example $extra \
    --set "listen=unix:$WORK/n$n.sock, tcp:127.0.0.1:$tcp" --set "node_name=n$n" \
    --set "gam=127.0.0.1:$GAM_PORT" --set "cluster_key_file=$WORK/cluster.key" \
    --set metrics_listen= --set "opencl.cache_dir=$BIN/kernel-cache" \
    --set log_level=warning 2> "$WORK/n$n.log" &
  PIDS="$PIDS $!"
done

# readiness: both nodes up at the GAM
tries=0
until [ "$("$CTL" --json nodes 2>/dev/null | python3 -c 'import json,sys; print(sum(n["state"]=="up" for n in json.load(sys.stdin)["nodes"]))' 2>/dev/null || echo 0)" = 2 ]; do
  tries=$((tries + 1))
  if [ $tries -gt 400 ]; then echo "cluster: the NAMs did not register" >&2; exit 1; fi
  sleep 0.05
done

echo
echo "-- emberctl label add (an admin's labels, kept in SQLite)"
"$CTL" label add n1 lr
"$CTL" label add n2 km
"$CTL" label add n2 lr

echo
echo "-- ember align --gam: the GAM places the app, the NAM checks its lease"
awk '/^>/ { n++ } n <= 200' "$DATA/dna_queries.fa" > "$WORK/q200.fa"
awk '/^>/ { n++ } n <= 200' "$DATA/dna_refs.fa" > "$WORK/r200.fa"
"$EMBER" align --gam "127.0.0.1:$GAM_PORT" --label sw \
  --query "$WORK/q200.fa" --ref "$WORK/r200.fa" --out "$WORK/cluster_dna.tsv"
echo "$(($(wc -l < "$WORK/cluster_dna.tsv") - 1)) pairs aligned"

echo
echo "-- emberctl status"
"$CTL" status
echo
echo "-- emberctl nodes"
"$CTL" nodes
echo
echo "-- emberctl events (newest first)"
"$CTL" events | head -n 8

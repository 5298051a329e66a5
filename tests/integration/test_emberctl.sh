#!/bin/sh
# test_emberctl.sh EMBERCTL EMBER_GAM EMBER_NAM GAM_HOLD_APP - emberctl and
# the GAM's admin API against a real ember-gam with two real ember-nam and
# an app holding a lease: every command in tables and in --json, changes
# with and without the token, unknown nodes, bad usage, an unreachable GAM;
# then malformed requests straight through curl (bad paths, labels,
# methods, limits, tokens, bodies) get a 4xx with a JSON error and the
# daemon survives them; /metrics passes `promtool check metrics` when
# promtool is installed. Every check prints what it compared when it
# fails; the script exits 1 if any failed.
set -u
CTL=$1
GAM=$2
NAM=$3
HOLD=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-ctl-test.XXXXXX") || exit 1
PIDS=""
HOLD_PID=""
cleanup() {
  exec 3>&- 2>/dev/null
  for p in $HOLD_PID $PIDS; do kill -TERM "$p" 2>/dev/null; done
  for p in $HOLD_PID $PIDS; do wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failures=0
checks=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*" >&2
}
need() {
  command -v "$1" >/dev/null 2>&1 || { echo "test_emberctl: needs $1" >&2; exit 1; }
}
need curl
need python3

. "$(dirname "$0")/wait_helpers.sh"

# run ARGS...: emberctl with stdout in $WORK/out, stderr in $WORK/err
run() {
  "$CTL" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  last="emberctl $*"
}

# expect CODE TEXT ARGS...: emberctl exits CODE, and its stdout (CODE 0) or
# stderr (otherwise) contains TEXT
expect() {
  want=$1 text=$2
  shift 2
  checks=$((checks + 1))
  run "$@"
  where="$WORK/err"
  [ "$want" -eq 0 ] && where="$WORK/out"
  if [ "$rc" -ne "$want" ]; then
    fail "$last: exit status $rc, expected $want; stdout and stderr:"
    sed 's/^/    /' "$WORK/out" "$WORK/err" >&2
  elif [ -n "$text" ] && ! grep -qF -- "$text" "$where"; then
    fail "$last: output lacks '$text'; it was:"
    sed 's/^/    /' "$where" >&2
  fi
  if [ "$want" -ne 0 ] && [ "$want" -ne 2 ] && [ "$(wc -l <"$WORK/err")" -ne 1 ]; then
    fail "$last: expected one line on stderr, got:"
    sed 's/^/    /' "$WORK/err" >&2
  fi
}

# json_check PYTHON_EXPR: $WORK/out parses as JSON and the expression, on
# it as j, is true
json_check() {
  checks=$((checks + 1))
  if ! python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$WORK/out" "$1" 2>"$WORK/pyerr"; then
    fail "$last: JSON check '$1' failed on:"
    sed 's/^/    /' "$WORK/out" "$WORK/pyerr" >&2
  fi
}

# http STATUS METHOD PATH [CURL_ARGS...]: the API answers STATUS with a JSON
# body (an error object for a 4xx); headers in $WORK/hdr, body in $WORK/out
http() {
  want=$1 method=$2 path=$3
  shift 3
  checks=$((checks + 1))
  last="curl -X $method $path $*"
  how="-X $method"
  [ "$method" = HEAD ] && how="--head"  # -X HEAD would wait for a body
  got=$(curl -s -o "$WORK/out" -D "$WORK/hdr" -w '%{http_code}' $how \
    "$@" "$URL$path")
  if [ "$got" != "$want" ]; then
    fail "$last: HTTP $got, expected $want; body:"
    sed 's/^/    /' "$WORK/out" >&2
    return
  fi
  if ! grep -qi '^content-type: application/json' "$WORK/hdr"; then
    fail "$last: not application/json:"
    sed 's/^/    /' "$WORK/hdr" >&2
  fi
  case $method/$want in
  HEAD/*) ;;
  */4*|*/5*) json_check 'isinstance(j["error"]["code"], str) and isinstance(j["error"]["message"], str)' ;;
  *) json_check 'isinstance(j, dict)' ;;
  esac
}

header_has() {
  checks=$((checks + 1))
  grep -qi "^$1" "$WORK/hdr" || { fail "$last: no '$1' header:"; sed 's/^/    /' "$WORK/hdr" >&2; }
}

# ---- a cluster: one GAM, two NAMs ------------------------------------------
TOKEN="ctl-test-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
(umask 077; printf '%s\n' "$TOKEN" >"$WORK/gam.token")
printf 'not-the-token\n' >"$WORK/bad.token"
"$GAM" --create-key "$WORK/cluster.key" || exit 1
GAM_PORT=$(port)
ADMIN_PORT=$(port)
URL="http://127.0.0.1:$ADMIN_PORT"
# one meaning per variable: EMBER_GAM_ADMIN is the admin API for emberctl,
# EMBER_GAM the binary HOST:PORT for libember (emberctl must not read it)
EMBER_GAM_ADMIN=$URL
EMBER_GAM=127.0.0.1:$GAM_PORT
EMBER_GAM_TOKEN_FILE=$WORK/gam.token
export EMBER_GAM_ADMIN EMBER_GAM EMBER_GAM_TOKEN_FILE

"$GAM" --set "listen=127.0.0.1:$GAM_PORT" --set "admin_listen=127.0.0.1:$ADMIN_PORT" \
  --set "cluster_key_file=$WORK/cluster.key" --set "admin_token_file=$WORK/gam.token" \
  --set "database=$WORK/gam.db" --set heartbeat_interval=200ms \
  2>"$WORK/gam.log" &
GAM_PID=$!
PIDS=$GAM_PID
until_ok 200 curl -sf "$URL/healthz" || { echo "ember-gam did not start:" >&2; cat "$WORK/gam.log" >&2; exit 1; }

for n in 1 2; do
  extra="--set=fpga-emu.boards=0"
  [ $n = 2 ] && extra="--label=big-memory"
  "$NAM" --set "listen=unix:$WORK/n$n.sock, tcp:127.0.0.1:$(port)" \
    --set "node_name=n$n" --set "gam=127.0.0.1:$GAM_PORT" \
    --set "cluster_key_file=$WORK/cluster.key" --set metrics_listen= \
    --set opencl.enabled=false --set heartbeat_interval=200ms $extra \
    2>"$WORK/n$n.log" &
  PIDS="$PIDS $!"
done
both_up() {
  "$CTL" --json nodes | python3 -c '
import json, sys
n = json.load(sys.stdin)["nodes"]
sys.exit(0 if sum(x["state"] == "up" and x["heartbeats"] > 0 for x in n) == 2 else 1)'
}
until_ok 400 both_up || { echo "the NAMs did not register:" >&2; cat "$WORK"/n*.log >&2; exit 1; }

# an app holding one lease on a node serving sw@fpga-emu (n2 has the board)
mkfifo "$WORK/hold.in"
"$HOLD" "127.0.0.1:$GAM_PORT" sw@fpga-emu 1 ctl-test-app <"$WORK/hold.in" \
  >"$WORK/hold.out" 2>"$WORK/hold.err" &
HOLD_PID=$!
exec 3>"$WORK/hold.in"
until_ok 400 grep -q '^ready$' "$WORK/hold.out" ||
  { echo "the app got no node:" >&2; cat "$WORK/hold.err" >&2; exit 1; }
HELD=$(head -n 1 "$WORK/hold.out")

# ---- the tool itself ----------------------------------------------------------
expect 0 "emberctl " --version
expect 0 "label add|rm NODE LABEL" --help
expect 0 "EMBER_GAM_ADMIN" --help
# a command's own help, wherever --help stands
expect 0 "Usage: emberctl [OPTIONS] status" status --help
expect 0 "Usage: emberctl [OPTIONS] label add|rm NODE LABEL" label --help
expect 0 "GET /v1/events?limit=N" --help events
expect 0 "Usage: emberctl [OPTIONS] drain NODE" drain n1 --help
expect 2 "Usage: emberctl"
expect 2 "unknown command 'frobnicate'" frobnicate
expect 2 "unknown option '--frobnicate'" --frobnicate status
expect 2 "option '--gam' needs a value" status --gam
expect 2 "usage: emberctl node ID" node
expect 2 "usage: emberctl node ID" node n1 n2
expect 2 "usage: emberctl label add|rm NODE LABEL" label add n1
expect 2 "label: 'mv' is not add or rm" label mv n1 x
expect 2 "usage: emberctl drain NODE" drain
expect 2 "events: N must be a whole number from 1 to 10000" events 0
expect 2 "events: N must be a whole number from 1 to 10000" events 5x
expect 2 "--timeout: 'soon'" --timeout soon status

# ---- reading: tables and JSON ---------------------------------------------------
expect 0 "nodes:       2 up, 0 lost, 0 drained (2 in all)" status
expect 0 "policy delay" status
grep -q '^ID  *STATE  *DRAINED  *LEASES  *LAST-HB  *LOAD  *FPGAS  *LABELS$' "$WORK/out" ||
  fail "status: no nodes table header: $(cat "$WORK/out")"
expect 0 "" --json status
json_check 'j["nodes"]["up"] == 2 and j["gam"]["policy"] == "delay" and j["leases"] == 1'

expect 0 "ID" nodes
grep -q '^n1  *up  *no  *0 ' "$WORK/out" || fail "nodes: no n1 row: $(cat "$WORK/out")"
grep -q "^$HELD  *up  *no  *1 .*big-memory" "$WORK/out" ||
  fail "nodes: $HELD does not hold 1 lease: $(cat "$WORK/out")"
# the columns line up: every row's STATE starts where the header's does
awk 'NR == 1 { at = index($0, "STATE") } NR > 1 && substr($0, at - 2, 2) != "  " { exit 1 }' \
  "$WORK/out" || fail "nodes: columns not aligned: $(cat "$WORK/out")"
expect 0 "" nodes --json
json_check '[n["id"] for n in j["nodes"]] == ["n1", "n2"]'

expect 0 "address:     tcp:127.0.0.1:" node n2
expect 0 "big-memory" node n2
expect 0 "" --json node n1
json_check 'j["node"]["id"] == "n1" and "sw" in j["node"]["labels"]'
expect 1 "no node 'nope' (HTTP 404, ENOTFOUND)" node nope
expect 1 "(HTTP 404, ENOTFOUND)" node 'a/b'

expect 0 "ctl-test-app" apps
grep -q "ctl-test-app  *sw@fpga-emu  *1  *running  *yes  *$HELD$" "$WORK/out" ||
  fail "apps: no running row on $HELD: $(cat "$WORK/out")"
expect 0 "" --json apps
json_check 'j["apps"][0]["name"] == "ctl-test-app" and len(j["apps"][0]["leases"]) == 1'

expect 0 "node_registered" events
expect 0 "" events 2 --json
json_check 'len(j["events"]) == 2 and all("kind" in e for e in j["events"])'

# ---- changes ---------------------------------------------------------------------
expect 0 "n1: label lr added; labels: cnn, lr, plf, sw" label add n1 lr
expect 0 "" --json node n1
json_check '"lr" in j["node"]["labels"] and "lr" in j["node"]["added"]'
expect 0 "label lr removed" label rm n1 lr
expect 0 "" --json node n1
json_check '"lr" not in j["node"]["labels"]'
expect 0 "n1: label sw removed" label rm n1 sw
expect 0 "" label add n1 sw
expect 1 "bad label 'bad label'" label add n1 'bad label'
expect 1 "no node 'nope'" label add nope lr
expect 1 "wrong admin token (HTTP 401, EDENIED; the token comes from $WORK/bad.token)" \
  --token-file "$WORK/bad.token" label add n1 lr
expect 1 "cannot read the admin token file $WORK/missing" \
  --token-file "$WORK/missing" drain n1
expect 0 "" --json node n1
json_check '"lr" not in j["node"]["labels"]'

expect 0 "$HELD: drained" drain "$HELD"
expect 0 "" --json node "$HELD"
json_check 'j["node"]["drained"] is True and j["node"]["leases"] == []'
expect 0 "" --json status
json_check 'j["nodes"]["drained"] == 1 and j["leases"] == 0'
expect 0 "$HELD: undrained" undrain "$HELD"
expect 0 "" --json node "$HELD"
json_check 'j["node"]["drained"] is False'
expect 1 "no node 'nope'" undrain nope

# ---- an unreachable GAM ------------------------------------------------------------
DEAD=$(port)
expect 1 "cannot reach the GAM at http://127.0.0.1:$DEAD" --gam "127.0.0.1:$DEAD" status
expect 1 "cannot reach the GAM" --gam "http://127.0.0.1:$DEAD/" --timeout 2 nodes

# ---- the API through curl: malformed requests ----------------------------------------
AUTH="Authorization: Bearer $TOKEN"
http 200 GET /healthz
json_check 'j == {"status": "ok"}'
http 200 HEAD /v1/status
http 404 GET /nope
http 404 GET /v1/nodes/
http 404 GET /v1/nodes/n1/labels
http 404 GET /v1/nodes/nope
http 400 GET '/v1/nodes/a%20b'
http 400 GET '/v1/nodes/%C3%A9'
http 404 POST '/v1/nodes/a%2Fb/drain' -H "$AUTH"
http 405 DELETE /v1/status
header_has 'Allow: GET, HEAD'
http 405 GET /v1/nodes/n1/drain
header_has 'Allow: POST'
http 405 PATCH /v1/nodes/n1/labels/x -H "$AUTH"
header_has 'Allow: PUT, DELETE'
http 401 PUT /v1/nodes/n1/labels/x
header_has 'WWW-Authenticate: Bearer'
http 401 PUT /v1/nodes/n1/labels/x -H "Authorization: Bearer wrong"
header_has 'WWW-Authenticate: Bearer'
http 401 POST /v1/nodes/n1/drain -H "Authorization: Basic dXNlcjpwYXNz"
http 401 POST /v1/nodes/n1/drain -H "Authorization: Bearer $TOKEN-and-more"
http 400 PUT '/v1/nodes/n1/labels/bad%FFlabel' -H "$AUTH"
http 400 PUT "/v1/nodes/n1/labels/$(printf '%070d' 0)" -H "$AUTH"
http 404 PUT /v1/nodes/nope/labels/lr -H "$AUTH"
http 400 GET '/v1/events?limit=0'
http 400 GET '/v1/events?limit=-1'
http 400 GET '/v1/events?limit=%00'
http 200 GET '/v1/events?limit=1'
head -c 100000 /dev/zero | tr '\0' a >"$WORK/big"
head -c 10000 /dev/zero | tr '\0' a >"$WORK/mid"
# declared too big: answered before the body is sent (100-continue)
http 413 POST /v1/nodes/n1/undrain -H "$AUTH" -H "Expect: 100-continue" \
  --data-binary "@$WORK/big"
# chunked, so only counted: read to the end, then refused
http 413 POST /v1/nodes/n1/undrain -H "$AUTH" -H 'Transfer-Encoding: chunked' \
  --data-binary "@$WORK/mid"
http 200 POST /v1/nodes/n1/undrain -H "$AUTH" --data-binary "small"
# a chunked body past the drain limit: the server closes the connection
checks=$((checks + 1))
curl -s -o /dev/null -X POST -H "$AUTH" -H 'Transfer-Encoding: chunked' \
  --data-binary "@$WORK/big" "$URL/v1/nodes/n1/undrain"
# raw garbage on the socket
python3 - "$ADMIN_PORT" <<'EOF' || fail "raw requests: the server did not answer"
import socket, sys
port = int(sys.argv[1])
for raw in [b"GARBAGE\r\n\r\n", b"GET /v1/nodes/\xff HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET " + b"/v1/nodes/" + b"n" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            b"PUT /v1/nodes/n1/labels/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n"]:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()
EOF
http 200 GET /healthz
checks=$((checks + 1))
kill -0 "$GAM_PID" 2>/dev/null || fail "ember-gam died"

# ---- /metrics --------------------------------------------------------------------------
checks=$((checks + 1))
code=$(curl -s -o "$WORK/metrics" -D "$WORK/hdr" -w '%{http_code}' "$URL/metrics")
[ "$code" = 200 ] || fail "/metrics: HTTP $code"
grep -qi '^content-type: text/plain; version=0.0.4' "$WORK/hdr" ||
  fail "/metrics: content type: $(cat "$WORK/hdr")"
# the build and the process, as every Prometheus target has them
for re in '^ember_gam_build_info\{version="[0-9][^"]*",protocol="[0-9]+"\} 1$' \
          '^process_cpu_seconds_total [0-9.]+$' '^process_resident_memory_bytes [1-9][0-9]*$' \
          '^process_virtual_memory_bytes [1-9][0-9]*$' '^process_open_fds [1-9][0-9]*$' \
          '^process_max_fds [1-9][0-9]*$' '^process_start_time_seconds [1-9][0-9.]*$'; do
  checks=$((checks + 1))
  grep -Eq "$re" "$WORK/metrics" || fail "/metrics has no line matching $re"
done
if command -v promtool >/dev/null 2>&1; then
  checks=$((checks + 1))
  promtool check metrics <"$WORK/metrics" >"$WORK/promtool" 2>&1 ||
    { fail "promtool check metrics:"; sed 's/^/    /' "$WORK/promtool" >&2; }
else
  echo "test_emberctl: promtool not found, /metrics not linted" >&2
fi

# ---- the app lets go ---------------------------------------------------------------------
exec 3>&-
wait "$HOLD_PID"
HOLD_PID=""
expect 0 "" --json apps
json_check 'j["apps"] == []'

# ---- ember-gam stops cleanly (and, in a sanitizer build, says nothing) ----
checks=$((checks + 1))
kill -TERM "$GAM_PID"
wait "$GAM_PID" || fail "ember-gam exited with status $? on SIGTERM"
PIDS=${PIDS#"$GAM_PID"}
if grep -q 'Sanitizer' "$WORK/gam.log"; then
  fail "ember-gam's log has sanitizer reports:"
  sed 's/^/    /' "$WORK/gam.log" >&2
fi

echo "test_emberctl: $checks checks, $failures failed"
[ "$failures" -eq 0 ]

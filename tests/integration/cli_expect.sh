# cli_expect.sh - what the daemons' command-line tests share; sourced with
# BIN set to the program under test. Gives WORK (a temporary directory,
# removed at exit), fail, expect and finish.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
checks=0
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# expect STATUS PATTERN ARGS...: exit status and a pattern in stdout+stderr
expect() {
  want=$1 pattern=$2
  shift 2
  checks=$((checks + 1))
  "$BIN" "$@" > "$WORK/out" 2>&1
  got=$?
  name=$(basename "$BIN")
  [ "$got" -eq "$want" ] || fail "$name $*: exit $got, expected $want: $(cat "$WORK/out")"
  grep -q -- "$pattern" "$WORK/out" || fail "$name $*: no '$pattern' in: $(cat "$WORK/out")"
}
# finish: the summary line; the exit status of the test
finish() {
  echo "$checks checks, $failed failed"
  [ "$failed" -eq 0 ] && echo "$checks passed, 0 failed"
  [ "$failed" -eq 0 ]
}

#!/bin/sh
# test_beagle_beast.sh EMBER EMBER_NAM SOURCE_DIR - Debian's BEAST 1.10
# (beast-mcmc, unchanged, through libhmsbeagle-jni) on libember-beagle.
#
# tests/data/plf/primates_beast.xml (ember's own analysis: 12 x 898 DNA,
# HKY+G4, a coalescent, a strict clock) runs 2,000 states with a fixed seed
# on Debian's BEAGLE, then through `ember beagle --embedded` and through a
# real ember-nam (`--nam`), in double precision with BEAST's default
# rescaling: every line of the screen log (state, posterior, prior,
# likelihood, root height) must be the same, character for character: the
# same likelihoods make the same chain. Single precision (-beagle_single,
# which Debian's BEAGLE answers in double anyway) must start on the same
# posterior and likelihood within 0.01 (about 2e-6 relative) for its first
# two lines; after that float rounding may turn an accept into a reject,
# and the chain may part from the double one. Exits 77 (skipped) without
# beast-mcmc.
set -u
. "$(dirname "$0")/wait_helpers.sh"
EMBER=$1
NAM=$2
SRC=$3
XML=$SRC/tests/data/plf/primates_beast.xml
command -v beast-mcmc >/dev/null 2>&1 || {
  echo "SKIP: beast-mcmc is not installed"
  exit 77
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-beast-test.XXXXXX") || exit 1
NAM_PID=""
cleanup() {
  if [ -n "$NAM_PID" ] && kill -0 "$NAM_PID" 2>/dev/null; then
    kill -TERM "$NAM_PID"
    wait "$NAM_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset EMBER_NAM EMBER_BEAGLE_DEBUG

failures=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*" >&2
}

sed -e 's/CHAIN/2000/' -e 's/LOG/200/' "$XML" > "$WORK/run.xml"

# run NAME PRECISION [WRAPPER...]: BEAST in its own directory; the screen
# log's lines into NAME.log, everything it printed into NAME.out
run() {
  name=$1 prec=$2
  shift 2
  mkdir -p "$WORK/$name"
  cp "$WORK/run.xml" "$WORK/$name/"
  (cd "$WORK/$name" && "$@" beast-mcmc -beagle "-beagle_$prec" -seed 4242 \
     -overwrite run.xml > "$WORK/$name.out" 2>&1)
  rc=$?
  grep -E '^[0-9]+[[:space:]]' "$WORK/$name.out" > "$WORK/$name.log"
  lines=$(wc -l < "$WORK/$name.log")
  if [ "$rc" -ne 0 ] || [ "$lines" -ne 11 ]; then
    fail "$name: BEAST exited $rc with $lines log lines (11 expected)"
    tail -n 20 "$WORK/$name.out" >&2
  fi
  # BEAST names the library it loaded: Debian's BEAGLE for the first run,
  # libember-beagle for every other
  want="Using libember-beagle"
  [ "$name" = beagle ] && want="Using BEAGLE library"
  grep -q "$want" "$WORK/$name.out" ||
    fail "$name: BEAST did not load what it should ('$want' not said)"
}

# same NAME: NAME's log equals BEAGLE's, line for line
same() {
  if cmp -s "$WORK/beagle.log" "$WORK/$1.log"; then
    echo "$1: the same $(wc -l < "$WORK/$1.log") log lines as BEAGLE"
  else
    fail "$1: the log differs from BEAGLE's"
    diff "$WORK/beagle.log" "$WORK/$1.log" | head -n 6 >&2
  fi
}

# close NAME: the first two lines' posterior and likelihood within 0.01
close() {
  if awk 'NR == FNR { if (FNR <= 2) { p[FNR] = $2; l[FNR] = $4 }; next }
          FNR <= 2 { d1 = $2 - p[FNR]; d2 = $4 - l[FNR]
                     if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2
                     if (d1 > 0.01 || d2 > 0.01) bad = 1; n++ }
          END { exit (bad || n != 2) }' "$WORK/beagle.log" "$WORK/$1.log"
  then
    echo "$1: starts within 0.01 of BEAGLE's double run"
  else
    fail "$1: first lines differ from BEAGLE's by more than 0.01"
    head -n 2 "$WORK/beagle.log" "$WORK/$1.log" >&2
  fi
}

run beagle double
run embedded double "$EMBER" beagle --embedded --
same embedded

SOCK=$WORK/nam.sock
"$NAM" --set "listen=unix:$SOCK" --set metrics_listen= > "$WORK/nam.log" 2>&1 &
NAM_PID=$!
until_ok 200 "$EMBER" accelerators --nam "unix:$SOCK" ||
  { fail "ember-nam did not start"; cat "$WORK/nam.log" >&2; }
run nam double "$EMBER" beagle --nam "unix:$SOCK" --
same nam

run embedded_single single "$EMBER" beagle --embedded --
close embedded_single
run nam_single single "$EMBER" beagle --nam "unix:$SOCK" --
close nam_single

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "BEAST through libember-beagle: all runs agree with BEAGLE"

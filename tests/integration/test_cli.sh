#!/bin/sh
# test_cli.sh EMBER DATA_DIR - the `ember` tool's arguments, errors and
# output formats. Everything runs --embedded (or against a socket that does
# not exist), so no daemon is needed. Every check prints what it compared
# when it fails; the script exits 1 if any failed.
set -u
EMBER=$1
DATA=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ember-cli-test.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT INT TERM

unset EMBER_NAM EMBER_RECONNECT_WINDOW_MS
# This test is about the tool, not the kernels (tests/conformance compares
# every variant): the scalar reference keeps it independent of them.
EMBER_SW_ISA=scalar
export EMBER_SW_ISA

failures=0
checks=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*" >&2
}

# run ARGS...: ember with stdout in $WORK/out, stderr in $WORK/err, status in rc
run() {
  "$EMBER" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  last="ember $*"
}

# expect CODE TEXT ARGS...: ember exits CODE and its stderr contains TEXT
# (any stderr when TEXT is empty)
expect() {
  want=$1 text=$2
  shift 2
  checks=$((checks + 1))
  run "$@"
  if [ "$rc" -ne "$want" ]; then
    fail "$last: exit status $rc, expected $want; stderr:"
    sed 's/^/    /' "$WORK/err" >&2
  elif [ -n "$text" ] && ! grep -qF -- "$text" "$WORK/err"; then
    fail "$last: stderr lacks '$text'; it was:"
    sed 's/^/    /' "$WORK/err" >&2
  fi
}

# same_file GOT EXPECTED WHAT
same_file() {
  checks=$((checks + 1))
  if ! cmp -s "$1" "$2"; then
    fail "$3: output differs from $2:"
    diff "$2" "$1" | sed 's/^/    /' >&2
  fi
}

Q=$DATA/queries.fa
R=$DATA/refs.fa

# ---- the tool itself ------------------------------------------------------
expect 0 "" --version
grep -q '^ember [0-9][0-9.]*' "$WORK/out" || fail "--version printed '$(cat "$WORK/out")'"
expect 0 "" --help
grep -q 'align' "$WORK/out" && grep -q 'accelerators' "$WORK/out" ||
  fail "--help does not list the commands"
expect 2 "Usage: ember COMMAND"
expect 2 "ember: unknown command 'frobnicate'" frobnicate
expect 2 "ember: unknown option '--frobnicate'" --frobnicate
expect 0 "" help align
grep -q -- '--gap-open' "$WORK/out" || fail "help align lacks --gap-open"
expect 0 "" align --help
grep -q -- '--query FILE' "$WORK/out" || fail "align --help lacks --query"
expect 2 "ember: unknown command 'nope'" help nope

# ---- usage errors: exit 2, naming the option -------------------------------
expect 2 "ember: align: --ref FILE is required" align --query "$Q"
expect 2 "ember: align: --query FILE is required" align --ref "$R"
expect 2 "ember: align: --match: 'abc' is not a whole number" \
  align --query "$Q" --ref "$R" --match abc
expect 2 "ember: align: --match: '' is not a whole number" \
  align --query "$Q" --ref "$R" --match ""
expect 2 "ember: align: --mismatch: '-3.5' is not a whole number" \
  align --query "$Q" --ref "$R" --mismatch -3.5
expect 2 "ember: align: --mismatch: 2 is out of range" \
  align --query "$Q" --ref "$R" --mismatch 2
expect 2 "ember: align: --gap-open: -1 is out of range" \
  align --query "$Q" --ref "$R" --gap-open -1
expect 2 "ember: align: --gap-extend: 99999999999999999999 is out of range" \
  align --query "$Q" --ref "$R" --gap-extend 99999999999999999999
expect 2 "ember: align: --threads: 0 is out of range" \
  align --query "$Q" --ref "$R" --threads 0
expect 2 "ember: align: --match and --mismatch score DNA" \
  align --query "$Q" --ref "$R" --protein --match 2
expect 2 "ember: align: --matrix scores proteins and needs --protein" \
  align --query "$Q" --ref "$R" --matrix BLOSUM62
expect 2 "ember: align: --nam and --embedded exclude each other" \
  align --query "$Q" --ref "$R" --nam unix:/nonexistent --embedded
expect 2 "ember: align: --gam excludes --nam and --embedded" \
  align --query "$Q" --ref "$R" --gam 127.0.0.1:1 --embedded
expect 2 "ember: align: --label is what to ask the GAM for: it needs --gam" \
  align --query "$Q" --ref "$R" --label sw
expect 2 "ember: align: --gam: an empty address" \
  align --query "$Q" --ref "$R" --gam ""
expect 1 "ember: align: cannot open a client for a node of the GAM" \
  align --query "$Q" --ref "$R" --gam 127.0.0.1:1
expect 2 "ember: align: unknown option '--frobnicate'" \
  align --query "$Q" --ref "$R" --frobnicate
expect 2 "ember: align: option '--json' takes no value" \
  align --query "$Q" --ref "$R" --json=yes
expect 2 "ember: align: option '--query' needs a value" align --query
expect 2 "ember: align: unexpected argument 'extra'" \
  align --query "$Q" --ref "$R" extra
expect 2 "ember: align: --platform: unknown kind 'gpu'" \
  align --query "$Q" --ref "$R" --platform gpu
expect 2 "ember: align: --query and --ref cannot both read standard input" \
  align --query - --ref -
expect 2 "ember: accelerators: unknown option '--frobnicate'" \
  accelerators --frobnicate
expect 2 "ember: accelerators: --nam and --embedded exclude each other" \
  accelerators --nam unix:/nonexistent --embedded

# ---- input errors: exit 1, naming the file, line and record -----------------
expect 1 "ember: align: --query: $WORK/missing.fa: cannot open: No such file or directory" \
  align --embedded --query "$WORK/missing.fa" --ref "$R"
expect 1 "ember: align: --ref: $WORK: cannot open: it is a directory" \
  align --embedded --query "$Q" --ref "$WORK"
expect 1 "ember: align: --query has 3 sequences, --ref has 2: they are aligned pairwise and must be as many" \
  align --embedded --query "$Q" --ref "$DATA/refs_two.fa"
expect 1 "empty_seq.fa:3: sequence 'b' is empty" \
  align --embedded --query "$DATA/empty_seq.fa" --ref "$R"
expect 1 "truncated.fq:6: record 'r2' is truncated" \
  align --embedded --query "$DATA/truncated.fq" --ref "$R"
expect 1 "qual_mismatch.fq:4: record 'r1': its quality has 5 characters, its sequence 4" \
  align --embedded --query "$DATA/qual_mismatch.fq" --ref "$R"
expect 1 "not_fasta.txt:1: not FASTA or FASTQ" \
  align --embedded --query "$DATA/not_fasta.txt" --ref "$R"
: >"$WORK/empty.fa"
expect 1 "empty.fa: no sequences in the file" \
  align --embedded --query "$WORK/empty.fa" --ref "$R"
expect 1 "ember: align: --out: cannot write '$WORK/no/such/dir.tsv'" \
  align --embedded --query "$Q" --ref "$R" --out "$WORK/no/such/dir.tsv"

# ---- results: TSV, exact header, golden values --------------------------------
expect 0 "ember: 3 pairs, " align --embedded --query "$Q" --ref "$R"
same_file "$WORK/out" "$DATA/expected.tsv" "TSV"
checks=$((checks + 1))
header=$(head -n 1 "$WORK/out")
[ "$header" = "$(printf 'query\tref\tscore\tquery_start\tquery_end\tref_start\tref_end')" ] ||
  fail "TSV header is '$header'"
grep -q "task[s]* (cpu [0-9]*), 0 retried, 0 fallbacks, via embedded" "$WORK/err" ||
  fail "summary line: $(cat "$WORK/err")"

# the same through --out, a gzip'd query, FASTQ, and standard input
expect 0 "via embedded" align --embedded --query "$Q" --ref "$R" --out "$WORK/res.tsv"
same_file "$WORK/res.tsv" "$DATA/expected.tsv" "--out"
checks=$((checks + 1))
[ -s "$WORK/out" ] && fail "--out also wrote to standard output"
if command -v gzip >/dev/null 2>&1; then
  gzip -c "$Q" >"$WORK/q.fa.gz"
  expect 0 "via embedded" align --embedded --query "$WORK/q.fa.gz" --ref "$R"
  same_file "$WORK/out" "$DATA/expected.tsv" "gzip'd FASTA"
  head -c 30 "$WORK/q.fa.gz" >"$WORK/cut.fa.gz"
  expect 1 "cut.fa.gz:1: read error (a truncated or corrupt gzip file?)" \
    align --embedded --query "$WORK/cut.fa.gz" --ref "$R"
else
  echo "skip: no gzip"
fi
expect 0 "via embedded" align --embedded --query "$DATA/queries.fq" --ref "$R"
same_file "$WORK/out" "$DATA/expected.tsv" "FASTQ"
checks=$((checks + 1))
"$EMBER" align --embedded --query - --ref "$R" <"$Q" >"$WORK/out" 2>"$WORK/err" ||
  fail "--query - failed: $(cat "$WORK/err")"
same_file "$WORK/out" "$DATA/expected.tsv" "--query -"

# options reach the library: a higher match score, protein mode, timings
expect 0 "via embedded" align --embedded --query "$Q" --ref "$R" --match 5 --mismatch -4 --gap-open 10 --gap-extend 2 --threads 1
checks=$((checks + 1))
grep -q "^q1	r1	40	0	7	0	7$" "$WORK/out" || fail "--match 5: $(sed -n 2p "$WORK/out")"
expect 0 "round trip" align --embedded --query "$Q" --ref "$R" --timings
expect 0 "via embedded" align --embedded --protein --query "$Q" --ref "$R"
expect 0 "via embedded" align --embedded --protein --matrix pam250 --query "$Q" --ref "$R"
expect 1 "unknown matrix 'NOPE'" align --embedded --protein --matrix NOPE --query "$Q" --ref "$R"

# ---- JSON: parses, same keys, names escaped ------------------------------------
expect 0 "via embedded" align --embedded --json --query "$DATA/odd_names.fa" --ref "$DATA/refs_acgt.fa"
checks=$((checks + 1))
if command -v python3 >/dev/null 2>&1; then
  python3 - "$WORK/out" <<'EOF' || fail "--json output: $(cat "$WORK/out")"
import json, sys
with open(sys.argv[1], "rb") as f:
    rows = json.loads(f.read().decode("utf-8"))
keys = ["query", "ref", "score", "query_start", "query_end", "ref_start", "ref_end"]
assert [list(r) for r in rows] == [keys] * 3, rows
assert [r["query"] for r in rows] == ['q"quote\\back', "caf\u00e9", "bad\ufffd"], rows
assert [r["ref"] for r in rows] == ["x", "y", "z"], rows
assert all(r["score"] == 12 and r["query_end"] == 3 for r in rows), rows
EOF
else
  grep -qF '"query": "q\"quote\\back"' "$WORK/out" || fail "--json escaping: $(cat "$WORK/out")"
fi

# ---- where it runs ----------------------------------------------------------------
# an unreachable NAM: align falls back in-process and says so ...
expect 0 "cannot be reached" align --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
same_file "$WORK/out" "$DATA/expected.tsv" "fallback"
checks=$((checks + 1))
grep -q "3 fallbacks, via unix:$WORK/none.sock" "$WORK/err" || fail "fallback summary: $(cat "$WORK/err")"
# ... unless told never to fall back: then nothing runs and nothing is written
expect 1 "cannot open a client for unix:$WORK/none.sock: cannot connect" \
  align --no-fallback --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
checks=$((checks + 1))
[ ! -s "$WORK/out" ] || fail "--no-fallback wrote: $(cat "$WORK/out")"
expect 2 "--no-fallback and --embedded exclude each other" \
  align --embedded --no-fallback --query "$Q" --ref "$R"
expect 2 "option '--no-fallback' takes no value" \
  align --no-fallback=1 --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
expect 0 "" help align
checks=$((checks + 1))
grep -q -- "--no-fallback " "$WORK/out" && grep -q -- "--reconnect-window MS" "$WORK/out" &&
  grep -q "3 some pairs did not complete" "$WORK/out" ||
  fail "help align lacks --no-fallback, --reconnect-window or exit status 3"
# --reconnect-window: milliseconds, 0 (off) and up
expect 2 "--reconnect-window: -1 is out of range [0, 86400000]" \
  align --reconnect-window -1 --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
expect 2 "--reconnect-window: 'soon' is not a whole number" \
  align --reconnect-window soon --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
expect 0 "3 fallbacks" \
  align --reconnect-window 0 --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
same_file "$WORK/out" "$DATA/expected.tsv" "--reconnect-window 0"
# a platform kind the in-process engine lacks: the tasks wait for the NAM,
# which never comes, and fail after the window with nothing written
expect 1 "the tasks wait for it within the reconnect window" \
  align --platform fpga-emu --reconnect-window 200 --nam "unix:$WORK/none.sock" \
  --query "$Q" --ref "$R"
checks=$((checks + 1))
grep -q "over the reconnect window of 200 ms" "$WORK/err" && [ ! -s "$WORK/out" ] ||
  fail "--platform fpga-emu without a NAM: $(cat "$WORK/err" "$WORK/out")"
# ... the same window from the environment, which must be a number
export EMBER_RECONNECT_WINDOW_MS=150
expect 1 "over the reconnect window of 150 ms" \
  align --platform fpga-emu --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
EMBER_RECONNECT_WINDOW_MS=soon
expect 1 "EMBER_RECONNECT_WINDOW_MS: 'soon' is not a number" \
  align --nam "unix:$WORK/none.sock" --query "$Q" --ref "$R"
unset EMBER_RECONNECT_WINDOW_MS
# ... while accelerators, which was told to ask that NAM, fails
expect 1 "ember: accelerators: cannot reach the NAM at unix:$WORK/none.sock" \
  accelerators --nam "unix:$WORK/none.sock"
expect 1 "ember: align: cannot open a client for bogus:addr" \
  align --nam bogus:addr --query "$Q" --ref "$R"
expect 0 "" accelerators --embedded
checks=$((checks + 1))
grep -q '^sw ' "$WORK/out" && grep -q '^PLATFORM ' "$WORK/out" ||
  fail "accelerators table: $(cat "$WORK/out")"
expect 0 "" accelerators --embedded --json
checks=$((checks + 1))
if command -v python3 >/dev/null 2>&1; then
  python3 -m json.tool "$WORK/out" >/dev/null || fail "accelerators --json: $(cat "$WORK/out")"
fi
grep -q '"name": "sw"' "$WORK/out" || fail "accelerators --json lacks sw"

# ---- beagle: exec a program with libember-beagle first ---------------------
expect 0 "" help beagle
grep -q -- '--print-libdir' "$WORK/out" || fail "help beagle lacks --print-libdir"
expect 2 "ember: beagle: no command to run" beagle
expect 2 "ember: beagle: no command to run" beagle --embedded --
expect 2 "ember: beagle: --nam and --embedded exclude each other" \
  beagle --nam unix:/nonexistent --embedded true
expect 2 "ember: beagle: --nam: an empty address" beagle --nam "" true
expect 2 "ember: beagle: unknown option '--frobnicate'" beagle --frobnicate true
expect 2 "ember: beagle: --print-libdir runs no command" beagle --print-libdir true
expect 127 "ember: beagle: cannot run '$WORK/none': No such file or directory" \
  beagle --embedded -- "$WORK/none"
# the library's directory: the build tree's, holding the SONAME
expect 0 "" beagle --print-libdir
libdir=$(cat "$WORK/out")
checks=$((checks + 1))
[ -f "$libdir/libhmsbeagle.so.1" ] || fail "beagle --print-libdir: '$libdir'"
# the program sees the directory first and EMBER_NAM as chosen; its own
# options and status pass through
LD_LIBRARY_PATH=/old/dir
export LD_LIBRARY_PATH
expect 0 "" beagle --embedded -- sh -c 'echo "$LD_LIBRARY_PATH $EMBER_NAM"'
checks=$((checks + 1))
[ "$(cat "$WORK/out")" = "$libdir:/old/dir embedded" ] ||
  fail "beagle --embedded: the program saw '$(cat "$WORK/out")'"
unset LD_LIBRARY_PATH
expect 0 "" beagle --nam unix:/x.sock sh -c 'echo "$LD_LIBRARY_PATH $EMBER_NAM"'
checks=$((checks + 1))
[ "$(cat "$WORK/out")" = "$libdir unix:/x.sock" ] ||
  fail "beagle --nam: the program saw '$(cat "$WORK/out")'"
EMBER_NAM=tcp:127.0.0.1:1 expect 0 "" beagle sh -c 'echo "$EMBER_NAM"'
checks=$((checks + 1))
[ "$(cat "$WORK/out")" = "tcp:127.0.0.1:1" ] ||
  fail "beagle: EMBER_NAM not passed through: '$(cat "$WORK/out")'"
expect 3 "" beagle --embedded sh -c 'echo oops >&2; exit 3'

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]

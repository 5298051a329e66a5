#!/bin/sh
# test_gam_cli - ember-gam's command line, through the skeleton it shares
# with ember-nam (common/daemon.c): --help, --version, bad usage,
# --check-config and --print-config with --set, --create-key, a state
# directory it cannot write.
# Usage: test_gam_cli.sh EMBER_GAM_BINARY
set -u
GAM=$1
BIN=$GAM
. "$(dirname "$0")/cli_expect.sh"

expect 0 "Usage: ember-gam" --help
expect 0 "--create-key FILE" --help
expect 0 "ember-gam [0-9]" --version
expect 2 "unexpected argument" stray
expect 2 "Usage: ember-gam" --no-such-option
printf 'policy = naive\n' > "$WORK/good.conf"
expect 0 "configuration OK" --config "$WORK/good.conf" --check-config
expect 0 "policy = static" --config "$WORK/good.conf" --set policy=static --print-config
printf 'polcy = naive\n' > "$WORK/bad.conf"
expect 1 "bad.conf:1: unknown key 'polcy'" --config "$WORK/bad.conf" --check-config
expect 1 "\-\-set policy=bogus" --set policy=bogus --check-config
checks=$((checks + 1))
"$GAM" --create-key "$WORK/cluster.key" || fail "--create-key: exit $?"
[ "$(stat -c %a "$WORK/cluster.key" 2>&1)" = 600 ] ||
  fail "--create-key: no file of mode 0600"
expect 1 "cluster.key" --create-key "$WORK/cluster.key"
# a state directory it cannot write is named as such (not SQLite's
# "unable to open database file")
: > "$WORK/afile"
expect 1 "state directory $WORK/afile is not writable: Not a directory" \
  --set cluster_key_file="$WORK/cluster.key" --set database="$WORK/afile/gam.db"
if [ "$(id -u)" -ne 0 ]; then  # root writes a 0500 directory anyway
  mkdir -m 0500 "$WORK/ro"
  expect 1 "state directory $WORK/ro is not writable: Permission denied" \
    --set cluster_key_file="$WORK/cluster.key" --set database="$WORK/ro/gam.db"
fi

finish

#!/bin/sh
# test_nam_cli - ember-nam's command line: --help, --version, --check-config
# on good and bad files (errors name file:line), --set errors, and the
# example config in deploy/ is what --print-config-example prints.
# Usage: test_nam_cli.sh EMBER_NAM_BINARY SOURCE_DIR
set -u
NAM=$1
SRC=$2
BIN=$NAM
. "$(dirname "$0")/cli_expect.sh"

expect 0 "Usage: ember-nam" --help
expect 0 "ember-nam [0-9]" --version
expect 2 "unexpected argument" stray
printf '# ok\nlisten = unix:%s/a.sock, tcp:127.0.0.1:7700\ncpu_workers = 2\n' "$WORK" > "$WORK/good.conf"
expect 0 "configuration OK" --config "$WORK/good.conf" --check-config
expect 0 "cpu_workers = 2" --config "$WORK/good.conf" --print-config
printf 'listen = unix:/tmp/x.sock\nlisen = 3\n' > "$WORK/bad.conf"
expect 1 "bad.conf:2: unknown key 'lisen'" --config "$WORK/bad.conf" --check-config
printf 'max_inflight = 0\n' > "$WORK/range.conf"
expect 1 "range.conf:1: key 'max_inflight'" --config "$WORK/range.conf" --check-config
printf 'listen = http:foo\n' > "$WORK/listen.conf"
expect 1 "listen.conf:1: key 'listen'" --config "$WORK/listen.conf" --check-config
expect 1 "cannot open" --config "$WORK/missing.conf" --check-config
expect 1 "\-\-set cpu_workers=abc" --set cpu_workers=abc --check-config
expect 0 "max_inflight = 7" --set max_inflight=7 --print-config

checks=$((checks + 1))
# plugin_dir's default follows the install prefix; the file shows /usr/local's
dir=$("$NAM" --print-config | sed -n 's/^plugin_dir = //p')
"$NAM" --print-config-example |
  sed "s|^#plugin_dir = $dir\$|#plugin_dir = /usr/local/lib/ember/accelerators|" \
  > "$WORK/example"
cmp -s "$WORK/example" "$SRC/deploy/nam.conf.example" ||
  fail "deploy/nam.conf.example differs from --print-config-example (regenerate it)"

finish

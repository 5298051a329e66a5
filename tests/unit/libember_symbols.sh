#!/bin/sh
# libember_symbols.sh NM ARCHIVE SHARED BUNDLE - fails when a libember
# defines a global symbol it should not.
#
# The rule: an application links libember into its own namespace, so every
# global symbol the library defines carries its prefix: the public API is
# ember_NAME (ember.h), internal functions shared between its files are
# ember__NAME (two underscores, as libuv's uv__). Anything else is either
# static or a name that can clash with the application's.
#
# ARCHIVE is the in-tree static library: only the objects of client/lib/
# (the engine, protocol, accelerators and common helpers are separate
# archives it references, undefined here), so ember_ and ember__ names.
# SHARED (libember.so) and BUNDLE (the installed libember.a, everything
# linked in) must show the public API only: ember_NAME, never ember__NAME
# nor nam_*, proto_*, log_* ... (a version script and a localizing objcopy
# make it so).
set -eu
nm=$1
archive=$2
shared=$3
bundle=$4

# sanitizer builds add their own (__odr_asan.NAME, __asan_*, ...): not ours
not_ours='^__(odr_asan|asan|ubsan|tsan|sanitizer)'

check() { # what, symbol list (NAME per line), allowed pattern
  what=$1 syms=$2 allowed=$3
  if ! echo "$syms" | grep -qx ember_connect; then
    echo "$what does not define ember_connect: not libember?"
    exit 1
  fi
  bad=$(echo "$syms" | grep -Ev "$allowed" | grep -Ev "$not_ours" |
        sort -u || true)
  if [ -n "$bad" ]; then
    echo "$what defines global symbols it should not:"
    echo "$bad"
    exit 1
  fi
  echo "$what: $(echo "$syms" | sort -u | wc -l) global symbols, all allowed"
}

check "$archive" "$("$nm" -g --defined-only "$archive" | awk 'NF == 3 {print $3}')" \
      '^ember_'
# EMBER_0 is the version node the map file names, an absolute symbol
check "$shared" "$("$nm" -D --defined-only "$shared" |
                   awk 'NF == 3 {sub(/@.*/, "", $3); print $3}' |
                   grep -vx 'EMBER_0')" '^ember_[^_]'
check "$bundle" "$("$nm" -g --defined-only "$bundle" | awk 'NF == 3 {print $3}')" \
      '^ember_[^_]'

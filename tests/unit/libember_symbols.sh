#!/bin/sh
# libember_symbols.sh NM ARCHIVE - fails when libember's static archive
# defines a global symbol that does not start with "ember_".
#
# The rule: an application links libember into its own namespace, so every
# global symbol the library defines carries its prefix: the public API is
# ember_NAME (ember.h), internal functions shared between its files are
# ember__NAME (two underscores, as libuv's uv__). Anything else is either
# static or a name that can clash with the application's.
#
# What the archive holds: only the objects of client/lib/ (the ember target,
# built from ember_client_obj). The engine (nam_*), the protocol (proto_*,
# ember__* from protoc-c), the accelerators (acc_*, sw_*) and the common
# helpers (config_*, hostport_*, log_*) are separate static libraries that
# libember's objects only reference: they are undefined here (nm -u) and
# not checked.
set -eu
nm=$1
archive=$2
syms=$("$nm" -g --defined-only "$archive")
# guard against checking an empty or wrong file
if ! echo "$syms" | awk 'NF == 3 && $3 == "ember_connect" {f = 1} END {exit !f}'
then
  echo "$archive does not define ember_connect: not libember?"
  exit 1
fi
# sanitizer builds add their own (__odr_asan.NAME, __asan_*, ...): not ours
bad=$(echo "$syms" | awk 'NF == 3 && $3 !~ /^ember_/ &&
                          $3 !~ /^__(odr_asan|asan|ubsan|tsan|sanitizer)/ {
                            print $2, $3 }' | sort -u)
if [ -n "$bad" ]; then
  echo "libember defines global symbols without the ember_ prefix (internal"
  echo "ones are ember__NAME):"
  echo "$bad"
  exit 1
fi
echo "libember: $(echo "$syms" | awk 'NF == 3' | sort -u | wc -l) global symbols, all ember_*"

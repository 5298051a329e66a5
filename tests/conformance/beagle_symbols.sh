#!/bin/sh
# beagle_symbols.sh SYSTEM_LIB OUR_LIB - libember-beagle exports every
# function the system's libhmsbeagle.so.1 exports, and nothing that is not
# a beagle* function; its SONAME is BEAGLE's.
set -u
sys=$1 ours=$2
if [ ! -e "$sys" ] || ! command -v nm >/dev/null 2>&1; then
  echo "SKIP: $sys or nm missing"
  exit 77
fi
nm -D --defined-only "$sys" | awk '$2 == "T" && $3 ~ /^beagle/ {print $3}' |
  sort >"${TMPDIR:-/tmp}/bsym.$$.sys"
nm -D --defined-only "$ours" | awk '$2 != "A" {print $3}' |
  sort >"${TMPDIR:-/tmp}/bsym.$$.ours"
missing=$(comm -23 "${TMPDIR:-/tmp}/bsym.$$.sys" "${TMPDIR:-/tmp}/bsym.$$.ours")
extra=$(grep -v '^beagle' "${TMPDIR:-/tmp}/bsym.$$.ours")
n=$(wc -l <"${TMPDIR:-/tmp}/bsym.$$.sys")
rm -f "${TMPDIR:-/tmp}/bsym.$$.sys" "${TMPDIR:-/tmp}/bsym.$$.ours"
fail=0
[ -z "$missing" ] || { echo "missing: $missing"; fail=1; }
[ -z "$extra" ] || { echo "exported beyond BEAGLE's: $extra"; fail=1; }
soname=$(objdump -p "$ours" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libhmsbeagle.so.1 ] || { echo "SONAME '$soname'"; fail=1; }
[ $fail = 0 ] && echo "all $n functions of $sys are exported, SONAME $soname"
exit $fail

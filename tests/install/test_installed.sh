#!/bin/sh
# test_installed.sh BUILD_DIR SRC_DIR CC CMAKE - install the build into a
# scratch prefix and build a program against it as a user would:
#   cc hello_ember.c $(pkg-config --cflags --libs ember)
#   the same against the static libember.a ($(pkg-config --static ...))
#   a CMake project with find_package(ember) and ember::ember
# Each binary runs an embedded alignment (hello_ember.c).
set -eu
build=$1 src=$2 cc=$3 cmake=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log"; exit 1; }
libdir=$(dirname "$(find "$prefix" -name ember.pc | head -n 1)")/..
libdir=$(cd "$libdir" && pwd)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
for f in "$prefix/include/ember/ember.h" "$prefix/include/ember/ember_version.h" \
         "$libdir/libember.a" "$libdir/pkgconfig/ember.pc" \
         "$libdir/cmake/ember/ember-config.cmake"; do
  [ -f "$f" ] || { echo "not installed: $f"; exit 1; }
done
# beside the libraries: configs, units with this prefix's paths, sysusers,
# tmpfiles, completion and man pages (help2man makes them; deploy/setup.sh
# installs it, and without it this fails rather than leave them unchecked)
for f in etc/ember/nam.conf etc/ember/gam.conf \
         lib/systemd/system/ember-nam.service lib/systemd/system/ember-gam.service \
         lib/sysusers.d/ember.conf lib/tmpfiles.d/ember.conf \
         share/bash-completion/completions/ember \
         share/bash-completion/completions/emberctl share/doc/ember/README.md; do
  [ -f "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
for f in man1/ember.1 man1/ember-align.1 man1/ember-lnl.1 man1/ember-train.1 \
         man1/ember-accelerators.1 man1/ember-beagle.1 man1/emberctl.1 \
         man1/ember-gam-sim.1 man8/ember-nam.8 man8/ember-gam.8; do
  [ -f "$prefix/share/man/$f" ] || {
    echo "not installed: man $f (is help2man installed? deploy/setup.sh does)"
    exit 1; }
done
grep -q "^ExecStart=$prefix/sbin/ember-nam --config $prefix/etc/ember/nam.conf" \
  "$prefix/lib/systemd/system/ember-nam.service" ||
  { echo "ember-nam.service: ExecStart does not name the installed paths"; exit 1; }
"$prefix/sbin/ember-nam" --config "$prefix/etc/ember/nam.conf" --check-config \
  >/dev/null || { echo "the installed nam.conf does not check"; exit 1; }

# libember-beagle: BEAGLE's SONAME in the private directory, finding this
# prefix's libember; `ember beagle` finds it from the installed binary
bg=$libdir/ember/beagle/libhmsbeagle.so.1
[ -f "$bg" ] || { echo "not installed: $bg"; exit 1; }
[ "$(objdump -p "$bg" | awk '$1 == "SONAME" {print $2}')" = libhmsbeagle.so.1 ] ||
  { echo "$bg: SONAME is not libhmsbeagle.so.1"; exit 1; }
found=$(ldd "$bg" | awk '$1 == "libember.so.0" {print $3}')
[ -n "$found" ] && [ "$(readlink -f "$found")" = "$(readlink -f "$libdir/libember.so.0")" ] ||
  { echo "$bg does not find the installed libember.so.0"; ldd "$bg"; exit 1; }
got=$("$prefix/bin/ember" beagle --print-libdir)
[ "$got" = "$libdir/ember/beagle" ] ||
  { echo "ember beagle --print-libdir: '$got', not $libdir/ember/beagle"; exit 1; }

soname=$(objdump -p "$libdir/libember.so" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libember.so.0 ] || { echo "SONAME is '$soname'"; exit 1; }
echo "installed: $(cd "$libdir" && ls libember*) (SONAME $soname)"

# shared, with pkg-config
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
"$cc" -Wall -Wextra -Werror -o "$tmp/hello_shared" "$src/hello_ember.c" \
  $(pkg-config --cflags --libs ember) -Wl,-rpath,"$libdir"
"$tmp/hello_shared"
ldd "$tmp/hello_shared" | grep -q "$libdir/libember.so.0" ||
  { echo "hello_shared does not use the installed libember.so.0"; exit 1; }

# static: the archive itself, then what pkg-config --static says it needs
# shellcheck disable=SC2046
"$cc" -Wall -Wextra -Werror -o "$tmp/hello_static" "$src/hello_ember.c" \
  $(pkg-config --cflags ember) "$libdir/libember.a" \
  $(pkg-config --static --libs-only-other --libs-only-l ember | sed 's/-lember\b//')
"$tmp/hello_static"
if ldd "$tmp/hello_static" | grep -q libember; then
  echo "hello_static links libember.so"; exit 1
fi

# CMake: find_package(ember)
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<EOP
cmake_minimum_required(VERSION 3.16)
project(hello C)
find_package(ember 0.1 REQUIRED)
add_executable(hello_cmake $src/hello_ember.c)
target_link_libraries(hello_cmake PRIVATE ember::ember)
EOP
"$cmake" -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
"$cmake" --build "$tmp/proj/build" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
"$tmp/proj/build/hello_cmake"

# the Python binding (component python), as Debian lays it out
pydir=$prefix/lib/python3/dist-packages
[ -f "$pydir/ember/__init__.py" ] || { echo "not installed: $pydir/ember"; exit 1; }
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import numpy' 2>/dev/null; then
    PYTHONPATH=$pydir EMBER_LIBRARY=$libdir/libember.so.0 PYTHONDONTWRITEBYTECODE=1 \
      "$py" -c 'import ember
with ember.connect("embedded", threads=1) as c:
    r = c.sw_align(["ACGTACGT"], ["TTACGTACGTTT"])
assert int(r["score"][0]) == 24, r
print("installed python ember", ember.__version__, "on libember", ember.version())'
    break
  fi
done
echo "installed libember: pkg-config (shared, static), find_package and python all work"

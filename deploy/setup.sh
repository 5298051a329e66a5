#!/bin/sh
# Installs every Debian package that ember's build, tests and demo need (a
# no-op when they are there), then configures and builds into build/.
# Run as root on Debian 12 (or with sudo available). EMBER_CMAKE_ARGS adds
# cmake options to the configure step.
# libcurl's GnuTLS flavour: libhts-dev depends on it, and the OpenSSL one
# conflicts with it (installing that would remove libhts-dev).
set -eu
cd "$(dirname "$0")/.."

PACKAGES="build-essential cmake pkg-config gzip python3 python3-numpy python3-pytest bsdextrautils
  libuv1-dev libjansson-dev protobuf-c-compiler libprotobuf-c-dev libinih-dev libsystemd-dev
  libhts-dev zlib1g-dev libmicrohttpd-dev libsqlite3-dev libsodium-dev libcurl4-gnutls-dev
  gnuplot-nox sqlite3 curl help2man
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libcmocka-dev libparasail-dev libssw-dev clang libclang-rt-14-dev uthash-dev
  liblapacke-dev libhmsbeagle-dev mrbayes beast-mcmc dataset-fashion-mnist libdnnl-dev
  prometheus"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# shellcheck disable=SC2086 # EMBER_CMAKE_ARGS is a list of options
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${EMBER_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"

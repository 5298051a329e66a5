#!/bin/sh
# Runs every test (unit, conformance, integration) of the build in build/.
set -eu
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"

#!/bin/sh
# run_pytest.sh PYTHON TESTDIR - run the Python binding's tests, or skip
# (exit 77, ctest's SKIP_RETURN_CODE) when that interpreter lacks numpy or
# pytest.
py=$1
dir=$2
if [ -z "$py" ] || ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "SKIP: no python3 with numpy and pytest (python3-numpy, python3-pytest)"
  exit 77
fi
exec "$py" -m pytest -q -p no:cacheprovider "$dir"

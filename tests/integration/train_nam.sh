# train_nam.sh - the ember-nam the `ember train` platform tests
# (test_train_platforms, test_train_darknet_platforms) train through, and
# the platform kinds it serves cnn on; sourced with EMBER, NAM, SRC, BIN,
# WORK, PIDS and failures set. Sources opencl_devices.sh.
. "$(dirname "$0")/opencl_devices.sh"

# start_nam SOCKET LOG: an ember-nam on unix:SOCKET (2 cpu workers, 4
# emulated FPGA boards with the cnn bitstream, an OpenCL device when pocl
# has one) logging to LOG, its pid added to PIDS; returns once it answers,
# its accelerators in $WORK/acc, and exits 1 when it does not within 30 s.
start_nam() {
  OMP_NUM_THREADS=1 "$NAM" --config "$SRC/deploy/nam.conf.example" \
    --set "listen=unix:$1" --set log_level=notice --set metrics_listen= \
    --set cpu_workers=2 --set "opencl.cache_dir=$BIN/kernel-cache" \
    --set fpga-emu.boards=4 --set "fpga-emu.bitstreams=cnn" \
    --set fpga-emu.reprogram_time=0 >"$2" 2>&1 &
  PIDS="$PIDS $!"
  tries=0
  until "$EMBER" accelerators --nam "unix:$1" >"$WORK/acc" 2>/dev/null; do
    tries=$((tries + 1))
    if [ $tries -gt 600 ]; then
      echo "FAIL: ember-nam did not come up:" >&2
      cat "$2" >&2
      exit 1
    fi
    sleep 0.05
  done
}

# cnn_kinds: from the accelerators in $WORK/acc, the platform kinds to
# train cnn on in kinds: cpu and fpga-emu, and opencl when the NAM serves
# cnn there. When this machine has an OpenCL device (opencl_devices) that
# the NAM does not serve cnn on, that is a failure; without one,
# opencl_missing is 1 (the test then exits 77 after the rest), else 0.
cnn_kinds() {
  kinds="cpu fpga-emu"
  opencl_missing=0
  if grep -q '^cnn .*opencl' "$WORK/acc"; then
    kinds="$kinds opencl"
  elif opencl_devices >/dev/null; then
    echo "FAIL: this machine has an OpenCL device ($(opencl_devices))," \
         "but the NAM's opencl platform does not serve cnn:" >&2
    cat "$WORK/acc" >&2
    failures=$((failures + 1))
  else
    echo "no OpenCL device on this machine: the opencl runs are skipped"
    opencl_missing=1
  fi
}

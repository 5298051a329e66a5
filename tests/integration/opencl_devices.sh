# opencl_devices.sh - sourced by the tests that run accelerators on ember's
# opencl platform. opencl_devices prints this machine's OpenCL devices as the
# ICD loader lists them (opencl_devices.c, named by $EMBER_TEST_OPENCL_DEVICES,
# which ctest sets in builds with OpenCL) and fails when there are none:
# a test skips its OpenCL part (and exits 77) only then, and fails when
# a device exists but ember's opencl platform does not serve.
opencl_devices() {
  [ -n "${EMBER_TEST_OPENCL_DEVICES:-}" ] || {
    echo "ember was built without OpenCL"; return 1; }
  "$EMBER_TEST_OPENCL_DEVICES"
}

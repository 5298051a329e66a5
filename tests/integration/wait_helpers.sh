# wait_helpers.sh - what tests that start daemons on TCP share (sourced):
# port and until_ok.

# port: a free TCP port on 127.0.0.1
port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# until_ok TRIES CMD...: run CMD every 50 ms until it succeeds (readiness of
# a daemon we started: an explicit answer, never a fixed sleep)
until_ok() {
  tries=$1
  shift
  while ! "$@" >/dev/null 2>&1; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    sleep 0.05
  done
}

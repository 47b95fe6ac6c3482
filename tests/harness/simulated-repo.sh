#!/usr/bin/env bash
# Build (cached by content hash) and serve the simulated NVIDIA apt repositories
# on loopback for containers that run with host networking.
#   simulated-repo.sh start | stop
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"
PIDFILE="$GPUFLEET_STATE_DIR/repo-http.pid"
PY=${PYTHON:-python3}

start() {
  mkdir -p "$GPUFLEET_STATE_DIR"
  for tool in dpkg-deb apt-ftparchive gpg; do
    command -v "$tool" >/dev/null || {
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq apt-utils gnupg dpkg-dev >/dev/null
      break
    }
  done
  "$PY" "$top/tests/nvidia_sim/repo/build_repo.py" --out "$GPUFLEET_TEST_REPO_DIR" --payload "$top/tests/nvidia_sim"
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "simulated repository: already served at $GPUFLEET_TEST_REPO_URL"
    return 0
  fi
  "$PY" "$top/tests/nvidia_sim/repo/serve.py" --dir "$GPUFLEET_TEST_REPO_DIR" \
    --port "$GPUFLEET_TEST_REPO_PORT" --bind 127.0.0.1 --pidfile "$PIDFILE"
  for _ in $(seq 1 20); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$GPUFLEET_TEST_REPO_URL/keys/fingerprint" 2>/dev/null; then
      echo "simulated repository: served at $GPUFLEET_TEST_REPO_URL"
      return 0
    fi
    sleep 0.5
  done
  echo "simulated repository: server did not answer" >&2
  return 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Ensure a Docker engine answers, for the container test harness.
#   docker-engine.sh start   use a running engine, or install Debian's docker.io
#                            and start dockerd in the background (recorded in
#                            $GPUFLEET_STATE_DIR/dockerd.pid so that only the
#                            daemon we started is ever stopped)
#   docker-engine.sh stop    stop the daemon this script started, if any
set -euo pipefail

STATE_DIR=${GPUFLEET_STATE_DIR:-/var/tmp/gpufleet-harness}
PIDFILE="$STATE_DIR/dockerd.pid"
LOG="$STATE_DIR/dockerd.log"
mkdir -p "$STATE_DIR"

retry() {  # bounded retries for network steps
  local n=0
  until "$@"; do
    n=$((n + 1))
    if [ "$n" -ge 3 ]; then echo "failed after $n attempts: $*" >&2; return 1; fi
    sleep $((n * 5))
  done
}

engine_up() { timeout 10 docker info >/dev/null 2>&1; }

start() {
  if engine_up; then echo "docker engine: using the running engine"; return 0; fi
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker engine: installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive
    retry apt-get update -qq
    retry apt-get install -y -qq docker.io >/dev/null
  fi
  if engine_up; then echo "docker engine: the package started one"; return 0; fi
  echo "docker engine: starting dockerd in the background (log: $LOG)"
  nohup dockerd >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 60); do
    if engine_up; then echo "docker engine: up"; return 0; fi
    sleep 1
  done
  echo "docker engine: dockerd did not answer within 60 s; last log lines:" >&2
  tail -n 20 "$LOG" >&2
  return 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
      echo "docker engine: stopping the dockerd we started (pid $pid)"
      kill "$pid"
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    rm -f "$PIDFILE"
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

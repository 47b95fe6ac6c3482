#!/usr/bin/env bash
# Build (cached by content hash) and serve the simulated NVIDIA apt repositories
# on loopback for containers that run with host networking.
#   simulated-repo.sh start [--env]   build and serve; --env prints the
#                                     GPUFLEET_TEST_REPO_DIR/_URL assignments
#                                     of this build (for eval) and nothing else
#   simulated-repo.sh stop
# Every build of a different simulator lives in its own directory,
# $GPUFLEET_STATE_DIR/repos/<content hash>, served at /<content hash>/ by one
# server: a run whose simulator differs (another checkout, a change made while
# a scenario installs packages) never swaps the packages under another run.
# The newest build is also served at / and linked as $GPUFLEET_STATE_DIR/repo,
# the defaults of the simulated inventory, for playbooks run by hand.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"
PIDFILE="$GPUFLEET_STATE_DIR/repo-http.pid"
REPOS="$GPUFLEET_STATE_DIR/repos"
PY=${PYTHON:-python3}
KEEP_BUILDS=4

say() { echo "$@" >&2; }

served_root_ok() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null \
    && [ "$(cat "$GPUFLEET_STATE_DIR/repo-http.root" 2>/dev/null)" = "$REPOS" ]
}

# The newest build at / and as $GPUFLEET_STATE_DIR/repo; older builds beyond
# the newest few are removed (they belong to runs long gone).
publish_latest() {
  local key=$1 entry
  for entry in "$REPOS/$key"/*; do
    ln -sfn "$key/$(basename "$entry")" "$REPOS/$(basename "$entry").tmp"
    mv -T "$REPOS/$(basename "$entry").tmp" "$REPOS/$(basename "$entry")"
  done
  if [ -d "$GPUFLEET_STATE_DIR/repo" ] && [ ! -L "$GPUFLEET_STATE_DIR/repo" ]; then
    rm -rf "$GPUFLEET_STATE_DIR/repo"  # the single-build layout of older checkouts
  fi
  ln -sfn "repos/$key" "$GPUFLEET_STATE_DIR/repo.tmp" && mv -T "$GPUFLEET_STATE_DIR/repo.tmp" "$GPUFLEET_STATE_DIR/repo"
  # Builds only (real directories named by their hash), newest first.
  find "$REPOS" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended -regex '.*/[0-9a-f]{12}' \
      -printf '%T@ %p\n' | sort -rn | tail -n +$((KEEP_BUILDS + 1)) | while read -r _ old; do
    [ "$(basename "$old")" = "$key" ] || rm -rf "$old"
  done
}

start() {
  local print_env=false key dir url
  [ "${1:-}" = "--env" ] && print_env=true
  mkdir -p "$REPOS"
  # The apt repositories need dpkg-deb and apt-ftparchive; the RPM ones
  # (Rocky-shaped hosts) Debian's rpmbuild, rpmsign and createrepo_c.
  for tool in dpkg-deb apt-ftparchive gpg rpmbuild createrepo_c; do
    command -v "$tool" >/dev/null || {
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq apt-utils gnupg dpkg-dev rpm createrepo-c >/dev/null
      break
    }
  done
  key=$("$PY" "$top/tests/nvidia_sim/repo/build_repo.py" --print-key --payload "$top/tests/nvidia_sim")
  dir="$REPOS/$key"
  url="http://127.0.0.1:$GPUFLEET_TEST_REPO_PORT/$key"
  "$PY" "$top/tests/nvidia_sim/repo/build_repo.py" --out "$dir" --payload "$top/tests/nvidia_sim" \
    --base-url "$url" >&2
  touch "$dir"
  publish_latest "$key"
  if served_root_ok; then
    say "simulated repository: already served (this build at $url)"
  else
    stop
    "$PY" "$top/tests/nvidia_sim/repo/serve.py" --dir "$REPOS" \
      --port "$GPUFLEET_TEST_REPO_PORT" --bind 127.0.0.1 --pidfile "$PIDFILE" >&2
    echo "$REPOS" > "$GPUFLEET_STATE_DIR/repo-http.root"
  fi
  for _ in $(seq 1 20); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$url/keys/fingerprint" 2>/dev/null; then
      say "simulated repository: served at $url"
      if $print_env; then
        echo "GPUFLEET_TEST_REPO_DIR=$dir"
        echo "GPUFLEET_TEST_REPO_URL=$url"
      fi
      return 0
    fi
    sleep 0.5
  done
  say "simulated repository: server did not answer"
  return 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE" "$GPUFLEET_STATE_DIR/repo-http.root"
  fi
}

case "${1:-start}" in
  start) shift || true; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start [--env] | stop" >&2; exit 2 ;;
esac

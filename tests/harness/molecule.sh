#!/usr/bin/env bash
# Run Molecule scenarios on the container harness:
#   tests/harness/molecule.sh [--keep] [-j N] [scenario ...]   (default: every scenario)
# Provides what the scenarios need and no registry can: a Docker engine, the
# locally built systemd base images, and the signed simulated NVIDIA repository.
# --keep: leave the engine and repository server running afterwards (what this
#         run started is otherwise stopped; what was already running, such as
#         the demo fleet's engine, is always left alone).
# -j N:   run N scenarios at once (default GPUFLEET_MOLECULE_JOBS, else 1).
#         Scenarios mostly wait on apt, systemd and Ansible's round trips, so
#         two or three at once finish sooner even on two cores. They can share
#         the host because every scenario names its own containers and no two
#         scenarios bind the same loopback port (see docs/testing.md).
# Each scenario's output goes to $GPUFLEET_STATE_DIR/logs/<scenario>.log and is
# printed whole when the scenario ends, so parallel output never interleaves.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"

keep=false
jobs=${GPUFLEET_MOLECULE_JOBS:-1}
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=true; shift ;;
    -j) jobs=$2; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    *) break ;;
  esac
done
case "$jobs" in ''|*[!0-9]*|0) echo "molecule.sh: -j wants a positive number, got '$jobs'" >&2; exit 2 ;; esac
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  # Longest first, so the slowest scenario does not start last. The weights
  # are seconds measured on the CI machine (docs/testing.md); unknown ones last.
  while read -r _w s; do scenarios+=("$s"); done < <(
    for f in "$top"/molecule/*/molecule.yml; do
      w=$(sed -n 's/^# ci-seconds: *\([0-9]*\).*/\1/p' "$f" | head -n1)
      echo "${w:-0} $(basename "$(dirname "$f")")"
    done | sort -k1,1rn -k2,2)
fi

# Every node shares the host's network: a port a scenario listens on (its
# "# ports:" line) that something else holds would make the scenario talk to
# the wrong daemon minutes from now. Refuse before anything starts. The
# scenario's own containers (left by an interrupted run) are destroyed by
# Molecule first, and the repository server is shared by design.
ports_free() {
  local s ports=() status=0
  for s in "${scenarios[@]}"; do
    [ -f "$top/molecule/$s/molecule.yml" ] || continue
    read -r -a ports < <(sed -n 's/^# ports: *\([0-9 ]*\).*/\1/p' "$top/molecule/$s/molecule.yml" | head -n1) || true
    python3 "$here/ports.py" --for "scenario $s" --own "$s-" \
      --own-pidfile "$GPUFLEET_STATE_DIR/repo-http.pid" "${ports[@]}" "$GPUFLEET_TEST_REPO_PORT" || status=1
  done
  return "$status"
}
ports_free || exit 1

# Stop at the end only what this run started: a demo fleet (make demo) keeps
# its engine and repository server.
engine_was_up=false
if timeout 10 docker info >/dev/null 2>&1; then engine_was_up=true; fi
repo_was_up=false
if [ -f "$GPUFLEET_STATE_DIR/repo-http.pid" ] && kill -0 "$(cat "$GPUFLEET_STATE_DIR/repo-http.pid")" 2>/dev/null; then
  repo_was_up=true
fi

cleanup() {
  # Stop whatever still runs (an interrupted run), then the shared services.
  local pids
  pids=$(jobs -pr)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
  fi
  if ! $keep; then
    if $repo_was_up; then echo "simulated repository: left running (it was before this run)"
    else "$here/simulated-repo.sh" stop || true; fi
    if $engine_was_up; then echo "docker engine: left running (it was before this run)"
    else "$here/docker-engine.sh" stop || true; fi
  fi
}
trap cleanup EXIT

"$here/docker-engine.sh" start
"$here/base-images.sh"
# This run's own build of the simulated repository (by content hash).
eval "$(PYTHON="$top/.venv/bin/python" "$here/simulated-repo.sh" start --env)"
export GPUFLEET_TEST_REPO_DIR GPUFLEET_TEST_REPO_URL

export PATH="$top/.venv/bin:$PATH"
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-0}
cd "$top"
logs="$GPUFLEET_STATE_DIR/logs"
mkdir -p "$logs"
# Compiler outputs of the real DKMS builds, kept between runs and keyed by
# ccache on their inputs (molecule/nvidia_driver_distribution/prepare.yml).
# Molecule interpolates that scenario's volumes from GPUFLEET_STATE_DIR (env.sh exports it).
mkdir -p "$GPUFLEET_STATE_DIR/ccache"

run_one() {
  local s=$1 start rc
  start=$(date +%s)
  # step_times.py appends the seconds of each Molecule step to the log.
  if molecule test -s "$s" 2>&1 | python3 "$here/step_times.py" > "$logs/$s.log"; then
    rc=0
  else
    local status=("${PIPESTATUS[@]}")
    rc=${status[0]}
    [ "$rc" != 0 ] || rc=${status[1]}
  fi
  echo "$rc $(( $(date +%s) - start ))" > "$logs/$s.result"
  return "$rc"
}

report() {
  local s=$1 rc secs
  read -r rc secs < "$logs/$s.result"
  echo "=== molecule scenario: $s ==="
  cat "$logs/$s.log"
  if [ "$rc" = 0 ]; then
    echo "=== scenario $s passed in $secs s ($(sed -n 's/^step seconds: //p' "$logs/$s.log" | tail -n1)) ==="
  else
    echo "=== scenario $s FAILED (exit $rc) after $secs s ===" >&2
    failed+=("$s")
  fi
}

# Report every finished scenario; one that died without writing its result
# (killed) counts as failed.
reap() {
  local r
  for r in "${!running[@]}"; do
    if [ ! -f "$logs/$r.result" ] && ! kill -0 "${running[$r]}" 2>/dev/null; then
      echo "255 0" > "$logs/$r.result"
    fi
    if [ -f "$logs/$r.result" ]; then report "$r"; unset "running[$r]"; fi
  done
}

failed=()
declare -A running=()
overall=$(date +%s)
for s in "${scenarios[@]}"; do
  [ -f "$top/molecule/$s/molecule.yml" ] || { echo "molecule.sh: no scenario '$s'" >&2; failed+=("$s"); continue; }
  rm -f "$logs/$s.result"
  while [ ${#running[@]} -ge "$jobs" ]; do
    wait -n || true
    reap
  done
  echo "--- starting scenario $s ($(( ${#running[@]} + 1 )) running) ---"
  run_one "$s" &
  running[$s]=$!
done
while [ ${#running[@]} -gt 0 ]; do
  wait -n || true
  reap
done
echo "molecule: ${#scenarios[@]} scenarios, $jobs at a time, $(( $(date +%s) - overall )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed scenarios: ${failed[*]}" >&2
  exit 1
fi
echo "all ${#scenarios[@]} molecule scenarios passed"

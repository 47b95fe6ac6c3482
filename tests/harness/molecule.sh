#!/usr/bin/env bash
# Run Molecule scenarios on the container harness:
#   tests/harness/molecule.sh [--keep] [scenario ...]   (default: every scenario)
# Provides what the scenarios need and no registry can: a Docker engine, the
# locally built systemd base images, and the signed simulated NVIDIA repository.
# --keep: leave the engine and repository server running afterwards (a daemon
# this script started is otherwise stopped).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"

keep=false
if [ "${1:-}" = "--keep" ]; then keep=true; shift; fi
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for f in "$top"/molecule/*/molecule.yml; do
    scenarios+=("$(basename "$(dirname "$f")")")
  done
fi

cleanup() {
  if ! $keep; then
    "$here/simulated-repo.sh" stop || true
    "$here/docker-engine.sh" stop || true
  fi
}
trap cleanup EXIT

"$here/docker-engine.sh" start
"$here/base-images.sh"
PYTHON="$top/.venv/bin/python" "$here/simulated-repo.sh" start

export PATH="$top/.venv/bin:$PATH"
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-0}
cd "$top"
failed=()
for s in "${scenarios[@]}"; do
  echo "=== molecule scenario: $s ==="
  start=$(date +%s)
  if molecule test -s "$s"; then
    echo "=== scenario $s passed in $(( $(date +%s) - start )) s ==="
  else
    echo "=== scenario $s FAILED after $(( $(date +%s) - start )) s ===" >&2
    failed+=("$s")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed scenarios: ${failed[*]}" >&2
  exit 1
fi
echo "all ${#scenarios[@]} molecule scenarios passed"

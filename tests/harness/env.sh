# Sourced by the harness scripts: where the harness keeps its state.
GPUFLEET_STATE_DIR=${GPUFLEET_STATE_DIR:-/var/tmp/gpufleet-harness}
GPUFLEET_TEST_REPO_DIR=${GPUFLEET_TEST_REPO_DIR:-$GPUFLEET_STATE_DIR/repo}
GPUFLEET_TEST_REPO_PORT=${GPUFLEET_TEST_REPO_PORT:-8765}
GPUFLEET_TEST_REPO_URL=${GPUFLEET_TEST_REPO_URL:-http://127.0.0.1:$GPUFLEET_TEST_REPO_PORT}
export GPUFLEET_STATE_DIR GPUFLEET_TEST_REPO_DIR GPUFLEET_TEST_REPO_PORT GPUFLEET_TEST_REPO_URL

# copy_collection TOP WORK: the checkout's tracked and new-but-not-ignored
# files, as ansible_collections/gpufleet/nvidia under WORK (ansible-test and
# antsibull-docs want that path); not the checkout's .collections link, which
# points back at the root. Prints the copy's path.
copy_collection() {
  local dest="$2/ansible_collections/gpufleet/nvidia"
  mkdir -p "$dest"
  (cd "$1" && git ls-files -z --cached --others --exclude-standard | grep -zv '^\.collections/' |
    xargs -0 -I{} cp --parents -P {} "$dest"/ 2>/dev/null || true)
  echo "$dest"
}

#!/usr/bin/env bash
# `make demo`: start the built-in simulated fleet (inventories/simulated) as
# systemd containers, each planted with a GPU profile, then converge site.yml
# on it exactly as an operator would: ansible-playbook site.yml -l gpu_nodes.
#   demo.sh          bring the fleet up (reusing running nodes) and converge
#   demo.sh --down   remove the fleet's containers
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/harness/env.sh
. "$here/env.sh"
export PATH="$top/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$top/ansible.cfg"
inventory="$top/inventories/simulated/hosts.yml"

# One read of the inventory: host<TAB>image<TAB>ports for every node, then
# repo<TAB>the repository URL and directory the inventory names. Every node
# sets its DCGM and exporter ports: the roles' defaults (5555, 9400) belong to
# the Molecule scenarios.
read_inventory() {
  ansible-inventory -i "$inventory" --list | python3 -c '
import json, sys
inv = json.load(sys.stdin)
hosts = inv["gpu_nodes"]["hosts"]
for host in hosts:
    hv = inv["_meta"]["hostvars"][host]
    missing = [v for v in ("dcgm_port", "dcgm_exporter_port") if v not in hv]
    if missing:
        sys.exit("demo.sh: %s sets no %s in the simulated inventory" % (host, " or ".join(missing)))
    print(host, hv["gpufleet_demo_image"], "%s %s" % (hv["dcgm_port"], hv["dcgm_exporter_port"]), sep="\t")
first = inv["_meta"]["hostvars"][hosts[0]]
print("repo", "%s %s" % (first["gpufleet_test_repo_url"], first["gpufleet_test_repo_dir"]), sep="\t")'
}
inventory_data=$(read_inventory)
fleet=$(grep -v $'^repo\t' <<<"$inventory_data")
inventory_repo=$(sed -n $'s/^repo\t//p' <<<"$inventory_data")

if [ "${1:-}" = "--down" ]; then
  while IFS=$'\t' read -r host _ _; do docker rm -f "$host" >/dev/null 2>&1 || true; done <<<"$fleet"
  echo "simulated fleet removed"
  exit 0
fi

# The fleet's own nodes may hold their ports (a second make demo); anything
# else holding one is refused now rather than found by a failing play.
read -r -a demo_ports < <(cut -f3 <<<"$fleet" | tr '\n' ' ') || true
python3 "$here/ports.py" --for "the demo fleet" --own gpufleet-demo- \
  --own-pidfile "$GPUFLEET_STATE_DIR/repo-http.pid" "${demo_ports[@]}" "$GPUFLEET_TEST_REPO_PORT"

"$here/docker-engine.sh" start
"$here/base-images.sh"
# Build (by content hash) and serve the simulated repository. The build just
# published is the newest, which the server also serves at / and the harness
# links as $GPUFLEET_STATE_DIR/repo: the fleet converges with those aliases,
# the values the simulated inventory itself names, so that rerunning site.yml
# against it as the README shows (no -e) changes nothing. (Molecule scenarios
# take the hash-named URL instead: a build made meanwhile by another checkout
# must not swap packages under a running scenario.)
"$here/simulated-repo.sh" start
repo_url="http://127.0.0.1:$GPUFLEET_TEST_REPO_PORT"
repo_dir="$GPUFLEET_STATE_DIR/repo"
rerun_extra=""
if [ "$inventory_repo" != "$repo_url $repo_dir" ]; then
  # A state directory or port other than the inventory's: say what a rerun needs.
  rerun_extra=" -e gpufleet_test_repo_url=$repo_url -e gpufleet_test_repo_dir=$repo_dir"
fi

while IFS=$'\t' read -r host image _; do
  if [ "$(docker inspect -f '{{.State.Running}}' "$host" 2>/dev/null)" = true ]; then
    echo "node $host: running"
    continue
  fi
  docker rm -f "$host" >/dev/null 2>&1 || true
  # Same container shape as the Molecule platforms (.config/molecule/config.yml).
  docker run -d --name "$host" --hostname "$host" \
    --cap-add SYS_ADMIN --tmpfs /run --tmpfs /run/lock \
    -v /sys/fs/cgroup:/sys/fs/cgroup:ro --network host --restart always \
    "gpufleet/${image}-systemd:latest" /lib/systemd/systemd >/dev/null
  echo "node $host: started ($image)"
done <<<"$fleet"

cd "$top"
ansible-playbook -i "$inventory" molecule/_shared/prepare.yml \
  -e gpufleet_test_sim_dir="$top/tests/nvidia_sim"
ansible-playbook -i "$inventory" site.yml -l gpu_nodes \
  -e gpufleet_test_repo_url="$repo_url" -e gpufleet_test_repo_dir="$repo_dir"
echo
echo "The simulated fleet is still running: explore it with"
echo "  ansible-playbook -i $inventory gpufleet.nvidia.gpu_report$rerun_extra"
echo "rerun the converge (it changes nothing) with"
echo "  ansible-playbook -i $inventory site.yml -l gpu_nodes$rerun_extra"
echo "and remove it with: tests/harness/demo.sh --down"

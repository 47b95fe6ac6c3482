"""Testinfra's view of the Molecule containers (loaded by the verifier through PYTEST_PLUGINS).

Ansible reaches the containers through the harness's own connection, gpufleet_nsenter
(tests/harness/connection_plugins), which testinfra does not know: it would run every
host.run() as an ad-hoc ansible command. Testinfra keeps its docker backend (docker exec), as
it had when the inventory named community.docker.docker, so that the verify steps check the
containers exactly as before.
"""
import copy

from testinfra.utils import ansible_runner

_get_ansible_host = ansible_runner.get_ansible_host


def get_ansible_host(config, inventory, host, *args, **kwargs):
    hostvars = inventory.get("_meta", {}).get("hostvars", {}).get(host, {})
    if hostvars.get("ansible_connection") == "gpufleet_nsenter":
        inventory = copy.deepcopy(inventory)
        inventory["_meta"]["hostvars"][host]["ansible_connection"] = "community.docker.docker"
    return _get_ansible_host(config, inventory, host, *args, **kwargs)


ansible_runner.get_ansible_host = get_ansible_host

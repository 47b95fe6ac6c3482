"""The harness itself: systemd, signed repository, fake driver, simulated nvidia-smi."""
import csv
import io
import json

import pytest


def profile(host):
    name = host.file("/etc/nvidia-sim/profile").content_string.strip()
    return json.loads(host.file("/usr/share/nvidia-sim/profiles/%s.json" % name).content_string)


def test_systemd_is_pid_1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), host.run("systemctl --failed").stdout


def test_repository_is_signed_by_its_own_keyring(host):
    source = host.file("/etc/apt/sources.list.d/gpufleet-harness-cuda.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/gpufleet-harness-cuda.asc" in source
    assert "Trusted" not in source
    assert not host.file("/etc/apt/trusted.gpg").exists


def test_apt_verifies_the_signature(host):
    update = host.run("apt-get update -o APT::Update::Error-Mode=any")
    assert update.rc == 0, update.stderr
    assert "not signed" not in update.stderr and "NO_PUBKEY" not in update.stderr


def test_a_wrong_key_is_rejected(host):
    # Same repository, signed-by a key that did not sign it: apt must refuse.
    uri = host.run("sed -n 's/^URIs: //p' /etc/apt/sources.list.d/gpufleet-harness-cuda.sources").stdout.strip()
    host.run("mkdir -p /tmp/wrongkey/lists/partial")
    host.run(
        "echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s /' > /tmp/wrongkey/sources.list" % uri
    )
    update = host.run(
        "apt-get update -o Dir::Etc::sourcelist=/tmp/wrongkey/sources.list -o Dir::Etc::sourceparts=- "
        "-o Dir::State::lists=/tmp/wrongkey/lists -o APT::Update::Error-Mode=any"
    )
    assert update.rc != 0
    assert "NO_PUBKEY" in update.stderr or "not signed" in update.stderr or "Signature" in update.stderr, update.stderr


def test_driver_branch_installed(host):
    pkg = host.package("cuda-drivers-570")
    assert pkg.is_installed
    assert pkg.version.startswith("570.")


def test_simulated_nvidia_smi_answers_with_profile_gpus(host):
    expected = profile(host)
    out = host.check_output("nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv")
    rows = list(csv.DictReader(io.StringIO(out), skipinitialspace=True))
    assert [r["uuid"] for r in rows] == [g["uuid"] for g in expected["gpus"]]
    names = {expected["models"][g["model"]]["product_name"] for g in expected["gpus"]}
    assert {r["name"] for r in rows} == names
    assert [int(r["index"]) for r in rows] == list(range(len(expected["gpus"])))


@pytest.mark.parametrize("args", [["-L"], ["-q", "-x"], ["topo", "-m"]])
def test_simulated_nvidia_smi_other_views(host, args):
    result = host.run("nvidia-smi " + " ".join(args))
    assert result.rc == 0, result.stderr
    assert result.stdout.strip()


# What a command sees of its container: namespaces, cgroups, capabilities, user, directory and
# the environment docker gives it. Ansible enters the containers with the harness's connection
# (gpufleet_nsenter); host.run here is testinfra's docker exec. They must agree, or the role
# scenarios would test something docker exec (and a real host's SSH session) does not give.
CONTEXT = (
    "for ns in mnt pid net uts ipc cgroup; do echo \"$ns $(readlink /proc/self/ns/$ns)\"; done; "
    "cat /proc/self/cgroup; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status; "
    "echo \"uid $(id -u) gid $(id -g) cwd $(pwd)\"; "
    "for v in PATH HOME HOSTNAME container; do eval \"echo $v=\\${$v-unset}\"; done"
)


def test_the_harness_connection_gives_what_docker_exec_gives(host):
    via_docker_exec = host.check_output(CONTEXT)
    connection = host.ansible.get_variables().get("ansible_connection")
    assert connection == "gpufleet_nsenter", connection
    via_ansible = host.ansible("ansible.builtin.shell", CONTEXT, check=False)
    assert via_ansible.get("rc") == 0, via_ansible
    assert via_ansible["stdout"] == via_docker_exec
    # The container's own cgroups (not init.scope below them, not the controller's).
    assert "/docker/" in via_docker_exec and "init.scope" not in via_docker_exec

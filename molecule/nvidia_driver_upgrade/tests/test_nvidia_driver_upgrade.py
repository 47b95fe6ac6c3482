"""The upgrade story of converge.yml: refused under a GPU job, then done when allowed."""
import json
import re

import pytest


@pytest.fixture(scope="module")
def story(host):
    variables = host.ansible.get_variables()
    return {
        "from": str(variables["upgrade_from_branch"]),
        "to": str(variables["upgrade_to_branch"]),
        "policy": variables["upgrade_reboot_policy"],
        "evidence": variables["upgrade_evidence_file"],
    }


@pytest.fixture(scope="module")
def evidence(host, story):
    return json.loads(host.file(story["evidence"]).content_string)


def _driver_packages(snapshot):
    """name -> version of the NVIDIA packages at a driver version, from a snapshot."""
    packages = {}
    for line in snapshot.split("holds:")[0].splitlines():
        parts = line.split()
        if len(parts) >= 2 and re.match(r"^[0-9]{3,4}\.", parts[1]):
            packages[parts[0]] = parts[1]
    return packages


# --- the refusal -------------------------------------------------------------

def test_refusal_names_the_job_and_the_variable(evidence):
    message = evidence["message"]
    assert "PID %d (train.py)" % evidence["job_pid"] in message
    assert "nvidia_driver_allow_disruptive_upgrade" in message
    assert "Nothing was changed" in message
    assert evidence["refused_task"] == "Refuse to change the driver under running GPU jobs"


def test_refusal_changed_nothing(evidence, story):
    # Package versions and states, holds, repository/keyring/modprobe/apt
    # configuration checksums and the loaded module: all identical.
    assert evidence["before"] == evidence["after"]
    before = _driver_packages(evidence["before"])
    assert before and {v.split(".")[0] for v in before.values()} == {story["from"]}
    holds = evidence["before"].split("holds:")[1].split("files:")[0].split()
    assert set(before) <= set(holds)


def test_job_survived_the_refusal(evidence):
    assert evidence["job_alive_after"] is True
    gpu_processes = evidence["after"].split("gpu processes:")[1]
    assert "%d, train.py" % evidence["job_pid"] in gpu_processes


# --- the allowed upgrade -------------------------------------------------------

def test_new_branch_is_installed_and_held(host, story):
    version = host.package("nvidia-driver").version
    assert version.split(".")[0] == story["to"]
    assert host.package("nvidia-open").version == version
    held = set(host.check_output("apt-mark showhold").split())
    assert {"nvidia-open", "nvidia-driver", "nvidia-kernel-open-dkms", "libcuda1", "nvidia-smi"} <= held
    listing = host.check_output(r"dpkg-query -W -f='${Package} ${Version}\n' 'nvidia-*' 'libnvidia-*' 'libcuda*'")
    stale = [line for line in listing.splitlines()
             if re.match(r"^\S+ [0-9]{3,4}\.", line) and line.split()[1] != version]
    assert stale == []


def test_dkms_has_the_new_module_only(host):
    installed = host.package("nvidia-driver").version.split("-")[0]
    status = host.check_output("dkms status")
    versions = set(re.findall(r"^nvidia[/,] ?([0-9.]+),", status, re.M))
    assert versions == {installed}, status


def test_reboot_required_is_reported_or_done(host, story):
    installed = host.package("nvidia-driver").version.split("-")[0]
    loaded = host.file("/run/nvidia-sim/loaded-driver").content_string.strip()
    smi = host.run("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    if story["policy"] == "never":
        # Still the old module: the host says it needs a reboot, and nvidia-smi
        # shows why (user space newer than the loaded module).
        assert loaded.split(".")[0] == story["from"]
        assert "System restart required" in host.file("/run/reboot-required").content_string
        assert "nvidia-open" in host.file("/run/reboot-required.pkgs").content_string.split()
        assert smi.rc == 18 and "Driver/library version mismatch" in smi.stdout + smi.stderr
    else:
        # The role rebooted the host (a container restart) and checked the driver.
        assert loaded == installed
        assert not host.file("/run/reboot-required").exists
        assert smi.rc == 0 and set(smi.stdout.split()) == {installed}

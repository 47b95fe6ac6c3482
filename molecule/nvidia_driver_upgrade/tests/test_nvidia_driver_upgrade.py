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
    # Fabric Manager and NSCQ of the old branch stay: they are the fabric_manager
    # role's, which moves them to the new driver's version (driver_upgrade.yml
    # runs it in the same pass; this scenario runs nvidia_driver alone).
    stale = [line for line in listing.splitlines()
             if re.match(r"^\S+ [0-9]{3,4}\.", line) and line.split()[1] != version
             and not re.match(r"^(nvidia-fabricmanager|libnvidia-nscq)", line)]
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


# --- the move within the branch above the security floor ---------------------------

def test_the_floor_moved_the_driver_within_the_branch(host, story):
    variables = host.ansible.get_variables()
    moved = json.loads(host.file(variables["upgrade_floor_evidence_file"]).content_string)
    assert moved["before"] == variables["upgrade_to_version"]
    assert moved["after"] == variables["upgrade_floor"]
    assert host.package("nvidia-driver").version.split("-")[0] == variables["upgrade_floor"]
    # Held again at the new release.
    assert "nvidia-driver" in host.check_output("apt-mark showhold").split()


# --- the GPU services around the upgrade -------------------------------------------

def _services(snapshot):
    """{unit: (ActiveState, MainPID)} from the services section of a snapshot."""
    section = snapshot.split("services:")[1].split("gpu processes:")[0]
    units = {}
    for block in section.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            units[props["Id"].replace(".service", "")] = (props.get("ActiveState"), int(props.get("MainPID") or 0))
    return units


def _expected_services(host):
    """The services that run on the host: Fabric Manager only where there are NVSwitches."""
    services = host.ansible.get_variables()["upgrade_services"]
    nvswitch = host.ansible.get_variables()["nvidia_sim_profile"] == "hgx_h100_8gpu"
    return [s for s in services if s != "nvidia-fabricmanager" or nvswitch]


def _events_of_the_upgrade(host):
    """(event, unit) in order, from the mark the converge writes before the allowed upgrade."""
    text = host.file(host.ansible.get_variables()["upgrade_service_log"]).content_string
    assert "upgrade begins" in text, text
    events = []
    for line in text.split("upgrade begins", 1)[1].splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("start", "stop"):
            events.append((parts[0], parts[1].replace(".service", "")))
    return events


def test_gpu_services_ran_and_the_refusal_left_them_running(host, evidence):
    before, after = _services(evidence["before"]), _services(evidence["after"])
    for unit in _expected_services(host):
        assert before[unit][0] == "active" and before[unit][1] > 0, (unit, before)
        # The same process: the refused run neither stopped nor restarted it.
        assert after[unit] == before[unit], (unit, before, after)


def test_gpu_services_were_stopped_in_order_for_the_upgrade(host):
    stops = []
    for event, unit in _events_of_the_upgrade(host):
        if event == "stop" and unit not in stops:
            stops.append(unit)
    # The order of nvidia_driver_upgrade_stop_services: the exporter, DCGM,
    # Fabric Manager, then the persistence daemon that holds the driver open.
    order = ["nvidia-dcgm-exporter", "nvidia-dcgm", "nvidia-fabricmanager", "nvidia-persistenced"]
    assert stops[:len(_expected_services(host))] == [u for u in order if u in _expected_services(host)], stops


def test_gpu_services_run_again_after_the_upgrade_or_wait_for_the_reboot(host, story):
    events = _events_of_the_upgrade(host)
    for unit in _expected_services(host):
        first_stop = events.index(("stop", unit))
        service = host.service(unit)
        if story["policy"] == "never":
            # Not started against the mismatched driver; they start with the reboot that loads it.
            assert not service.is_running, unit
            assert ("start", unit) not in events[first_stop:], (unit, events)
        else:
            # Started again after the reboot, Fabric Manager at the new driver's version by its role.
            assert ("start", unit) in events[first_stop:], (unit, events)
            assert service.is_running, unit

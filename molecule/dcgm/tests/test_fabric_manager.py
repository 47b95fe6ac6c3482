"""Fabric Manager as the role leaves it: on the NVSwitch host, the packages of
the driver's exact version under the branch's names, held, and a running
service that brought every GPU into the NVLink fabric; on the host without
NVSwitch, nothing at all."""
import csv
import io

import pytest
from gpufleet_packages import held, installed, is_el, version


def variables(host):
    return host.ansible.get_variables()


def has_nvswitch(host):
    return variables(host).get("nvidia_sim_profile") == "hgx_h100_8gpu"


def driver_version(host):
    """The loaded driver's version (the simulated driver loads the installed
    one): the driver packages' names differ between NVIDIA's Debian, Ubuntu
    and EL repositories, nvidia-smi says the same everywhere."""
    out = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    return out.split()[0]


def package_names(host):
    """NVIDIA's names: from 580 unversioned everywhere; before, the branch in
    both names on Debian and Ubuntu, in NSCQ's only on EL."""
    branch = driver_version(host).split(".")[0]
    if int(branch) >= 580:
        return ["nvidia-fabricmanager", "libnvidia-nscq"]
    if is_el(host):
        return ["nvidia-fabric-manager", "libnvidia-nscq-%s" % branch]
    return ["nvidia-fabricmanager-%s" % branch, "libnvidia-nscq-%s" % branch]


@pytest.fixture
def nvswitch_host(host):
    if not has_nvswitch(host):
        pytest.skip("no NVSwitch on this host")
    return host


@pytest.fixture
def plain_host(host):
    if has_nvswitch(host):
        pytest.skip("this host has NVSwitches")
    return host


def test_packages_have_the_drivers_exact_version_and_are_held(nvswitch_host):
    locked = held(nvswitch_host)
    for name in package_names(nvswitch_host):
        assert version(nvswitch_host, name) == driver_version(nvswitch_host) + "-1", name
        assert name in locked, name


def test_fabric_manager_reports_the_drivers_version(nvswitch_host):
    out = nvswitch_host.check_output("nv-fabricmanager --version")
    assert out.strip().endswith(driver_version(nvswitch_host))


def test_service_enabled_and_running(nvswitch_host):
    service = nvswitch_host.service("nvidia-fabricmanager")
    assert service.is_enabled
    assert service.is_running
    pid = nvswitch_host.file("/var/run/nvidia-fabricmanager/nv-fabricmanager.pid").content_string.strip()
    assert nvswitch_host.file("/proc/%s" % pid).is_directory


def test_every_gpu_joined_the_nvlink_fabric(nvswitch_host):
    out = nvswitch_host.check_output("nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader")
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert len(rows) == 8
    assert {(r[1], r[2]) for r in rows} == {("Completed", "Success")}


def test_fabric_manager_configured_the_switches(nvswitch_host):
    log = nvswitch_host.file("/var/log/fabricmanager.log").content_string
    assert "Successfully configured all the available NVSwitches" in log
    assert "don't match" not in log


def test_nothing_installed_without_nvswitch(plain_host):
    assert installed(plain_host, "*fabricmanager*", "*fabric-manager*", "*nscq*") == {}
    assert not plain_host.file("/lib/systemd/system/nvidia-fabricmanager.service").exists
    assert not plain_host.file("/var/run/nvidia-fabricmanager/nv-fabricmanager.pid").exists

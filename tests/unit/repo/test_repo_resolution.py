# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dependency resolution of the simulated repositories with the host's apt.

Each test asks apt (simulation mode, sandboxed, empty dpkg status) what an
install would do, as a role's apt task on a fresh host would.
"""

import os

import catalog
from repo_test_support import deb_member, deb_path

NEWEST_BRANCH = max(catalog.DRIVER_BRANCHES, key=int)
NEWEST_DRIVER = catalog.DRIVER_BRANCHES[NEWEST_BRANCH][-1]
OLDER_580, NEWER_580 = catalog.DRIVER_BRANCHES["580"][0], catalog.DRIVER_BRANCHES["580"][-1]
OLDER_570, NEWER_570 = catalog.DRIVER_BRANCHES["570"][0], catalog.DRIVER_BRANCHES["570"][-1]
DRIVER_PACKAGE_NAMES = {p.name for p in catalog.driver_packages()}


def _pin(apt, cuda_dir, target):
    """Install the preferences file of nvidia-driver-pinning-<target> under
    its real name (apt ignores preferences.d files with other extensions)."""
    name = "nvidia-driver-pinning-%s" % target
    version = target + "-1"
    path = "/etc/apt/preferences.d/%s.pref" % name
    apt.add_preferences(os.path.basename(path), deb_member(deb_path(cuda_dir, name, version), path).decode())


def _driver_versions(result):
    """Versions of the driver packages apt would install."""
    return {name: version for name, version in result.installed.items() if name in DRIVER_PACKAGE_NAMES}


def test_branch_meta_without_pin_pulls_newest_branch(apt):
    # NVIDIA's metas say (>= version): without a pin the newest branch wins.
    result = apt.install("cuda-drivers-570")
    assert result.ok, result
    assert result.installed["cuda-drivers-570"] == NEWER_570 + "-1"
    assert result.installed["nvidia-driver"] == NEWEST_DRIVER + "-1"


def test_branch_pin_resolves_cuda_drivers_570_to_570_pieces(apt, cuda_dir):
    _pin(apt, cuda_dir, "570")
    result = apt.install("cuda-drivers-570")
    assert result.ok, result
    versions = _driver_versions(result)
    assert {"nvidia-driver", "nvidia-driver-cuda", "nvidia-kernel-dkms", "nvidia-smi", "libcuda1",
            "libnvidia-ml1", "nvidia-persistenced", "firmware-nvidia-gsp"} <= set(versions)
    assert set(versions.values()) == {NEWER_570 + "-1"}


def test_branch_pin_applies_without_recommends(apt, cuda_dir):
    _pin(apt, cuda_dir, "570")
    result = apt.install("cuda-drivers-570", recommends=False)
    assert result.ok, result
    assert set(_driver_versions(result).values()) == {NEWER_570 + "-1"}


def test_version_pin_selects_the_older_version_of_a_branch(apt, cuda_dir):
    _pin(apt, cuda_dir, OLDER_570)
    result = apt.install("cuda-drivers", "nvidia-fabricmanager-570", "libnvidia-nscq-570")
    assert result.ok, result
    versions = _driver_versions(result)
    assert versions["cuda-drivers"] == OLDER_570 + "-1"
    assert set(versions.values()) == {OLDER_570 + "-1"}


def test_in_branch_upgrade_moves_every_piece(apt, cuda_dir):
    _pin(apt, cuda_dir, OLDER_570)
    installed = apt.install("nvidia-open")
    assert installed.ok, installed
    apt.set_installed(os.path.join(cuda_dir, "Packages"), installed.installed)
    apt.clear_preferences()
    _pin(apt, cuda_dir, "570")
    result = apt.run("dist-upgrade", "-s")
    assert result.ok, result
    assert result.installed == {name: NEWER_570 + "-1" for name in installed.installed
                                if name in DRIVER_PACKAGE_NAMES}


def test_nvidia_open_570_with_fabric_manager_550_is_unsatisfiable(apt, cuda_dir):
    result = apt.install("nvidia-open=%s-1" % NEWER_570, "nvidia-fabricmanager-550")
    assert not result.ok
    assert "unmet dependencies" in result.output
    _pin(apt, cuda_dir, "570")
    assert not apt.install("nvidia-open", "nvidia-fabricmanager-550").ok


def test_fabric_manager_of_another_580_version_is_unsatisfiable(apt):
    result = apt.install("nvidia-open", "nvidia-fabricmanager=%s-1" % OLDER_580)
    assert not result.ok
    assert "nvidia-fabricmanager : Depends: nvidia-kernel-support (= %s-1)" % OLDER_580 in result.output
    matching = apt.install("nvidia-open", "nvidia-fabricmanager", "libnvidia-nscq")
    assert matching.ok, matching
    assert matching.installed["nvidia-fabricmanager"] == matching.installed["nvidia-smi"] == NEWER_580 + "-1"


def test_fabric_manager_570_follows_the_ubuntu_named_driver(apt):
    # Branch-named packages keep to their branch without any pin.
    result = apt.install("nvidia-fabricmanager-570", "nvidia-driver-570-open")
    assert result.ok, result
    assert set(_driver_versions(result).values()) == {NEWER_570 + "-1"}
    assert "nvidia-dkms-570-open" in result.installed
    assert "nvidia-kernel-support" not in result.installed


def test_kernel_module_flavours_conflict(apt):
    result = apt.install("nvidia-kernel-dkms", "nvidia-kernel-open-dkms")
    assert not result.ok
    assert "nvidia-kernel-dkms : Conflicts: nvidia-kernel-open-dkms" in result.output
    assert not apt.install("cuda-drivers", "nvidia-open").ok
    assert not apt.install("nvidia-driver-570", "nvidia-driver-570-open").ok


def test_open_meta_installs_the_open_flavour(apt):
    result = apt.install("nvidia-open")
    assert result.ok, result
    assert "nvidia-kernel-open-dkms" in result.installed
    assert "nvidia-kernel-dkms" not in result.installed


def test_compute_only_install(apt):
    result = apt.install("nvidia-driver-cuda", "nvidia-kernel-open-dkms")
    assert result.ok, result
    assert {"nvidia-smi", "libcuda1", "nvidia-persistenced"} <= set(result.installed)
    assert "nvidia-driver" not in result.installed


def test_driver_families_do_not_mix(apt, cuda_dir):
    _pin(apt, cuda_dir, "570")
    assert not apt.install("nvidia-driver-570", "nvidia-open").ok
    assert not apt.install("nvidia-driver-550", "nvidia-driver-570").ok


def test_cuda_toolkit_pulls_no_driver_package(apt):
    result = apt.install("cuda-toolkit-12-8")
    assert result.ok, result
    assert {"cuda-nvcc-12-8", "cuda-cudart-12-8", "cuda-toolkit-12-8-config-common",
            "cuda-toolkit-12-config-common", "cuda-toolkit-config-common"} <= set(result.installed)
    assert not set(result.installed) & DRIVER_PACKAGE_NAMES


def test_cudnn_for_two_cuda_majors_conflicts(apt):
    assert apt.install("cudnn9-cuda-13", "cuda-toolkit-13-0").ok
    assert not apt.install("cudnn9-cuda-12", "cudnn9-cuda-13").ok


def test_container_toolkit_versions_cannot_mix(apt):
    result = apt.install("nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit-base=1.18.0-1")
    assert not result.ok
    assert "Depends: nvidia-container-toolkit-base (= 1.17.8-1)" in result.output
    assert not apt.install("libnvidia-container-tools=1.17.8-1", "libnvidia-container1=1.17.7-1").ok
    pinned = apt.install(*("%s=1.17.8-1" % n for n in ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                                                       "libnvidia-container-tools", "libnvidia-container1")))
    assert pinned.ok, pinned
    assert set(pinned.installed) == {"nvidia-container-toolkit", "nvidia-container-toolkit-base",
                                     "libnvidia-container-tools", "libnvidia-container1", "nvidia-sim-runtime"}


def test_dcgm3_conflicts_with_dcgm4(apt):
    result = apt.install("datacenter-gpu-manager", "datacenter-gpu-manager-4-cuda12")
    assert not result.ok
    assert "Conflicts: datacenter-gpu-manager" in result.output
    assert apt.install("datacenter-gpu-manager").ok


def test_dcgm4_proprietary_cuda_pulls_its_siblings(apt):
    result = apt.install("datacenter-gpu-manager-4-proprietary-cuda13")
    assert result.ok, result
    newest = "1:%s-1" % catalog.DCGM4_VERSIONS[-1]
    assert result.installed == {
        "datacenter-gpu-manager-4-core": newest, "datacenter-gpu-manager-4-cuda13": newest,
        "datacenter-gpu-manager-4-proprietary": newest, "datacenter-gpu-manager-4-proprietary-cuda13": newest,
        "nvidia-sim-runtime": catalog.SIM_RUNTIME_VERSION}


def test_dcgm_exporter_needs_dcgm4(apt):
    result = apt.install("datacenter-gpu-manager-exporter")
    assert result.ok, result
    assert "datacenter-gpu-manager-4-core" in result.installed
    assert not apt.install("datacenter-gpu-manager-exporter", "datacenter-gpu-manager").ok

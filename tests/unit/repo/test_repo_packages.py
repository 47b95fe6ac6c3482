# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control fields, version schemes, payload placement and maintainer scripts
of the built packages."""

import json
import os
import re
import subprocess

import pytest

import catalog
from repo_test_support import deb_field, deb_listing, deb_member, deb_path

DRIVER = catalog.DRIVER_BRANCHES["570"][-1]
DRIVER_V = DRIVER + "-1"
RELEASE_12_8 = next(r for r in catalog.CUDA_RELEASES if r["release"] == "12.8")


def _packages_index(directory):
    with open(os.path.join(directory, "Packages")) as handle:
        stanzas = [dict(re.findall(r"^([\w-]+): (.*)$", s, re.M)) for s in handle.read().strip().split("\n\n")]
    index = {}
    for stanza in stanzas:
        index.setdefault(stanza["Package"], []).append(stanza)
    return index


def _dir_of(package, cuda_dir, ctk_dir):
    """The repository directory carrying package: the toolkit's, the Debian 12
    CUDA repository, or the one CUDA repository of a per-distribution package
    (NVIDIA's Ubuntu metas are only in ubuntu2204/ubuntu2404)."""
    if package.repos == ("container-toolkit",):
        return ctk_dir
    if "cuda" in package.repos or "cuda:debian12" in package.repos:
        return cuda_dir
    distro = package.repos[0].split(":", 1)[1]
    return cuda_dir.replace(catalog.CUDA_REPO_DIR % "debian12", catalog.CUDA_REPO_DIR % distro)


def _deb_of(package, cuda_dir, ctk_dir):
    return os.path.join(_dir_of(package, cuda_dir, ctk_dir), package.filename)


def _conffiles(deb):
    listing = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], universal_newlines=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return listing.stdout.split() if listing.returncode == 0 else []


def test_control_fields_match_the_catalog(cuda_dir, ctk_dir):
    indexes = {}
    for package in catalog.packages():
        directory = _dir_of(package, cuda_dir, ctk_dir)
        index = indexes.setdefault(directory, _packages_index(directory))
        versions = {s["Version"]: s for s in index[package.name]}
        stanza = versions[package.version]
        assert stanza["Architecture"] == package.architecture
        assert stanza.get("Depends", "") == ", ".join(package.depends)
        assert stanza.get("Conflicts", "") == ", ".join(package.conflicts)
        assert stanza.get("Provides", "") == ", ".join(package.provides)


@pytest.mark.parametrize("name, pattern", [
    ("nvidia-smi", r"^\d{3}\.\d+\.\d{2}-1$"),
    ("cuda-drivers-570", r"^570\.\d+\.\d{2}-1$"),
    ("nvidia-fabricmanager-550", r"^550\.\d+\.\d{2}-1$"),
    ("cuda-nvcc-12-8", r"^12\.8\.\d+-1$"),
    ("cuda-toolkit-12-8", r"^12\.8\.\d+-1$"),
    ("cuda-compat-12-8", r"^570\.\d+\.\d{2}-1$"),
    ("libcudnn9-cuda-12", r"^9\.\d+\.\d+\.\d+-1$"),
    ("nvidia-container-toolkit", r"^1\.1[78]\.\d+-1$"),
    ("datacenter-gpu-manager-4-core", r"^1:4\.\d+\.\d+-1$"),
    ("datacenter-gpu-manager", r"^1:3\.\d+\.\d+$"),
    ("cuda-keyring", r"^1\.1-1$"),
])
def test_version_schemes(cuda_dir, ctk_dir, name, pattern):
    index = {**_packages_index(cuda_dir), **_packages_index(ctk_dir)}
    versions = [s["Version"] for s in index[name]]
    assert versions and all(re.match(pattern, v) for v in versions), versions


def test_driver_branches_and_versions(cuda_dir):
    index = _packages_index(cuda_dir)
    nvidia_driver = sorted(s["Version"] for s in index["nvidia-driver"])
    assert len(nvidia_driver) == 6
    assert {v.split(".")[0] for v in nvidia_driver} == {"535", "550", "570", "580"}
    assert sorted(s["Version"] for s in index["cuda-drivers"]) == nvidia_driver
    for branch in ("570", "580"):
        assert len(index["cuda-drivers-%s" % branch]) == 2      # in-branch upgrades
    # nvidia-open exists from branch 560 on, as in NVIDIA's repository.
    assert {s["Version"].split(".")[0] for s in index["nvidia-open"]} == {"570", "580"}


def test_fabric_manager_and_nscq_names_per_branch(cuda_dir):
    index = _packages_index(cuda_dir)
    for branch in ("535", "550", "570"):
        fm = index["nvidia-fabricmanager-%s" % branch][0]
        assert fm["Provides"] == "nvidia-fabricmanager"
        assert fm["Conflicts"] == "nvidia-fabricmanager"
        assert "libnvidia-nscq-%s" % branch in index
    assert "nvidia-fabricmanager-580" not in index and "libnvidia-nscq-580" not in index
    assert sorted(s["Version"] for s in index["nvidia-fabricmanager"]) == sorted(
        v + "-1" for v in catalog.DRIVER_BRANCHES["580"])
    for stanza in index["libnvidia-nscq"]:
        assert stanza["Depends"].startswith("nvidia-kernel-support (= %s)" % stanza["Version"])


def test_piece_dependencies_are_exact_and_metas_are_minimum(cuda_dir):
    assert "libnvidia-ml1 (= %s)" % DRIVER_V in deb_field(deb_path(cuda_dir, "nvidia-smi", DRIVER_V), "Depends")
    assert "nvidia-kernel-support (= %s)" % DRIVER_V in deb_field(
        deb_path(cuda_dir, "nvidia-kernel-open-dkms", DRIVER_V), "Depends")
    meta = deb_field(deb_path(cuda_dir, "nvidia-open", DRIVER_V), "Depends")
    assert meta.startswith("nvidia-kernel-open-dkms (>= %s)" % DRIVER)
    assert "nvidia-kernel-dkms" in deb_field(deb_path(cuda_dir, "cuda-drivers-570", DRIVER_V), "Depends")


def test_container_toolkit_packages_pin_each_other(ctk_dir):
    deb = deb_path(ctk_dir, "nvidia-container-toolkit", "1.17.8-1")
    assert deb_field(deb, "Depends") == ("nvidia-container-toolkit-base (= 1.17.8-1), "
                                         "libnvidia-container-tools (= 1.17.8-1), libnvidia-container-tools (<< 2.0.0)")
    assert deb_field(deb_path(ctk_dir, "libnvidia-container-tools", "1.17.8-1"), "Depends") == \
        "libnvidia-container1 (>= 1.17.8)"


def test_dcgm_relations(cuda_dir):
    core = deb_path(cuda_dir, "datacenter-gpu-manager-4-core", "1:4.2.3-1")
    assert deb_field(core, "Conflicts") == "datacenter-gpu-manager"
    cuda12 = deb_path(cuda_dir, "datacenter-gpu-manager-4-cuda12", "1:4.2.3-1")
    assert deb_field(cuda12, "Depends") == "datacenter-gpu-manager-4-core (= 1:4.2.3-1)"
    assert deb_field(cuda12, "Provides") == "datacenter-gpu-manager-4 (= 1:4.2.3-1)"
    exporter = deb_path(cuda_dir, "datacenter-gpu-manager-exporter", catalog.DCGM_EXPORTER_VERSION + "-1")
    assert deb_field(exporter, "Depends").startswith("datacenter-gpu-manager-4-core (>= 1:4")
    assert "/etc/dcgm-exporter/default-counters.csv" in _conffiles(exporter)
    assert deb_member(exporter, "/usr/share/nvidia-sim/dcgm-exporter-version").decode() == \
        catalog.DCGM_EXPORTER_VERSION + "\n"
    assert deb_member(core, "/usr/share/nvidia-sim/dcgm-version").decode() == "4.2.3\n"
    assert "useradd -Urs /usr/sbin/nologin ${service_user}" in deb_member_control(core, "postinst")


@pytest.mark.parametrize("name", ["nvidia-smi", "nvidia-utils-570"])
def test_driver_utils_ship_the_simulator(cuda_dir, name):
    deb = deb_path(cuda_dir, name, DRIVER_V)
    listing = deb_listing(deb)
    for path in ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-sim-workload", "/usr/bin/nvidia-sim-modload"):
        assert listing[path][0] == "-rwxr-xr-x", path
    assert "/lib/systemd/system/nvidia-sim-modload.service" in listing
    assert deb_member(deb, "/usr/share/nvidia-sim/driver-version").decode() == DRIVER + "\n"
    postinst = deb_member_control(deb, "postinst")
    assert "nvidia-sim-modload --if-not-loaded" in postinst
    assert "systemctl enable nvidia-sim-modload.service" in postinst
    assert "nvidia-sim-runtime" in deb_field(deb, "Depends")


def deb_member_control(deb, name):
    return subprocess.run(["dpkg-deb", "-I", deb, name], check=True, universal_newlines=True,
                          stdout=subprocess.PIPE).stdout


def test_sim_runtime_ships_nvsim_and_profiles(cuda_dir, ctk_dir):
    for directory in (cuda_dir, ctk_dir):
        listing = deb_listing(deb_path(directory, "nvidia-sim-runtime", catalog.SIM_RUNTIME_VERSION))
        assert "/usr/lib/nvidia-sim/nvsim/stand_in.py" in listing
        assert "/usr/share/nvidia-sim/profiles/stand_in.json" in listing
        assert listing["/usr/bin/nvidia-sim-hw"][0] == "-rwxr-xr-x"


@pytest.mark.parametrize("name, flavour", [("nvidia-kernel-dkms", "proprietary"),
                                           ("nvidia-kernel-open-dkms", "open"),
                                           ("nvidia-dkms-570", "proprietary"),
                                           ("nvidia-dkms-570-open", "open")])
def test_kernel_module_packages_ship_a_dkms_tree(cuda_dir, name, flavour):
    deb = deb_path(cuda_dir, name, DRIVER_V)
    assert deb_member(deb, "/usr/share/nvidia-sim/kernel-module-flavour").decode() == flavour + "\n"
    dkms_conf = deb_member(deb, "/usr/src/nvidia-%s/dkms.conf" % DRIVER).decode()
    assert 'PACKAGE_NAME="nvidia"' in dkms_conf and 'PACKAGE_VERSION="%s"' % DRIVER in dkms_conf
    assert "dkms" not in [d.split()[0] for d in deb_field(deb, "Depends").split(", ")]


def test_persistenced_and_fabric_manager_payload(cuda_dir, payload):
    persistenced = deb_path(cuda_dir, "nvidia-persistenced", DRIVER_V)
    listing = deb_listing(persistenced)
    assert listing["/usr/bin/nvidia-persistenced"][0] == "-rwxr-xr-x"
    assert "/lib/systemd/system/nvidia-persistenced.service" in listing
    assert "useradd --system" in deb_member_control(persistenced, "postinst")
    fm = deb_path(cuda_dir, "nvidia-fabricmanager-570", DRIVER_V)
    listing = deb_listing(fm)
    assert "/usr/bin/nv-fabricmanager" in listing and "/lib/systemd/system/nvidia-fabricmanager.service" in listing
    with open(os.path.join(payload, "data", "fabricmanager.cfg"), "rb") as handle:
        assert deb_member(fm, "/usr/share/nvidia/nvswitch/fabricmanager.cfg") == handle.read()
    # NVIDIA's package declares the configuration file below /usr/share a conffile.
    assert _conffiles(fm) == ["/usr/share/nvidia/nvswitch/fabricmanager.cfg"]
    assert deb_member(fm, "/usr/share/nvidia-sim/fabricmanager-version").decode() == DRIVER + "\n"


def test_nvcc_prints_the_release_banner(cuda_dir, tmp_path):
    deb = deb_path(cuda_dir, "cuda-nvcc-12-8", RELEASE_12_8["nvcc"] + "-1")
    script = tmp_path / "nvcc"
    script.write_bytes(deb_member(deb, "/usr/local/cuda-12.8/bin/nvcc"))
    output = subprocess.run(["sh", str(script), "--version"], check=True, universal_newlines=True,
                            stdout=subprocess.PIPE).stdout
    assert output.splitlines()[0] == "nvcc: NVIDIA (R) Cuda compiler driver"
    assert "Cuda compilation tools, release 12.8, V12.8.93" in output
    assert subprocess.run(["sh", str(script)], stderr=subprocess.PIPE, check=False).returncode == 1


def test_cuda_runtime_layout_and_version_json(cuda_dir):
    cudart = deb_listing(deb_path(cuda_dir, "cuda-cudart-12-8", RELEASE_12_8["cudart"] + "-1"))
    assert "/usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12.8.90" in cudart
    assert cudart["/usr/local/cuda-12.8/lib64"][1] == "targets/x86_64-linux/lib"
    config = deb_path(cuda_dir, "cuda-toolkit-12-8-config-common", RELEASE_12_8["cudart"] + "-1")
    version = json.loads(deb_member(config, "/usr/local/cuda-12.8/version.json").decode())
    assert version["cuda"]["version"] == "12.8.1" and version["cuda_nvcc"]["version"] == "12.8.93"
    compat = deb_listing(deb_path(cuda_dir, "cuda-compat-12-8", RELEASE_12_8["compat_driver"] + "-1"))
    assert "/usr/local/cuda-12.8/compat/libcuda.so.%s" % RELEASE_12_8["compat_driver"] in compat


def test_no_package_creates_usr_local_cuda(cuda_dir, ctk_dir):
    for package in catalog.packages():
        for name in deb_listing(_deb_of(package, cuda_dir, ctk_dir)):
            assert name != "/usr/local/cuda" and not name.startswith("/usr/local/cuda/"), package.name


def test_cudnn_version_header(cuda_dir):
    deb = deb_path(cuda_dir, "libcudnn9-dev-cuda-12", "9.10.2.21-1")
    header = deb_member(deb, "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h").decode()
    assert re.search(r"^#define CUDNN_MAJOR 9$", header, re.M)
    assert re.search(r"^#define CUDNN_MINOR 10$", header, re.M)
    assert re.search(r"^#define CUDNN_PATCHLEVEL 2$", header, re.M)
    assert "--slave /usr/include/cudnn_version.h" in deb_member_control(deb, "postinst")


def test_container_toolkit_cdi_refresh_units_from_1_18(ctk_dir):
    new = deb_path(ctk_dir, "nvidia-container-toolkit-base", "1.18.0-1")
    old = deb_path(ctk_dir, "nvidia-container-toolkit-base", "1.17.8-1")
    units = {"/etc/systemd/system/nvidia-cdi-refresh.path", "/etc/systemd/system/nvidia-cdi-refresh.service"}
    assert units <= set(deb_listing(new)) and not units & set(deb_listing(old))
    assert "enable --now nvidia-cdi-refresh.path" in deb_member_control(new, "postinst")
    assert deb_listing(old)["/usr/bin/nvidia-ctk"][0] == "-rwxr-xr-x"
    assert deb_member(old, "/usr/share/nvidia-sim/container-toolkit-version").decode() == "1.17.8\n"
    assert "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env" in _conffiles(new)


def test_pinning_packages_write_a_preferences_file_apt_reads(cuda_dir):
    deb = deb_path(cuda_dir, "nvidia-driver-pinning-%s" % DRIVER, DRIVER_V)
    path = "/etc/apt/preferences.d/nvidia-driver-pinning-%s.pref" % DRIVER
    text = deb_member(deb, path).decode()
    assert "Pin: version %s-*" % DRIVER in text and "Pin-Priority: 1000" in text
    packages = re.search(r"^Package: (.*)$", text, re.M).group(1).split()
    assert {"nvidia-driver", "nvidia-open", "cuda-drivers", "nvidia-fabricmanager-570", "libcuda1"} <= set(packages)
    assert path in _conffiles(deb)


def test_every_etc_file_is_a_conffile(cuda_dir, ctk_dir):
    for package in catalog.packages():
        deb = _deb_of(package, cuda_dir, ctk_dir)
        etc = {name for name, (mode, target) in deb_listing(deb).items()
               if name.startswith("/etc/") and mode.startswith("-") and target is None}
        assert etc == {c for c in _conffiles(deb) if c.startswith("/etc/")}, package.name


def test_maintainer_scripts_are_valid_sh():
    # The Canonical archive's too (its prebuilt modules' depmod scripts).
    for package in catalog.all_packages():
        for script in ("postinst", "prerm", "postrm"):
            text = getattr(package, script)
            if text:
                check = subprocess.run(["sh", "-n"], input=text, universal_newlines=True,
                                       stderr=subprocess.PIPE, check=False)
                assert check.returncode == 0, "%s %s: %s" % (package.name, script, check.stderr)

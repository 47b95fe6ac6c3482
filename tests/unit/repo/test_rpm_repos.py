# GNU General Public License v3.0+ (see LICENSES or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rpm repositories of the Rocky-shaped hosts, read with rpm and
gpg as dnf would read them: every artifact of the nvidia-driver module is a
package of the repository, every package is signed by its repository's key
(the container toolkit's are not, as NVIDIA's), every repomd.xml signature
verifies, and every dependency is met inside the repositories or by what the
shaped host's userland records (tests/harness/base-images.sh)."""

import glob
import gzip
import os
import re
import subprocess
import sys

import pytest
import yaml

from repo_test_support import REPO_SRC

if REPO_SRC not in sys.path:
    sys.path.insert(0, REPO_SRC)

import catalog  # noqa: E402  pylint: disable=wrong-import-position
import catalog_el  # noqa: E402  pylint: disable=wrong-import-position

RHEL9 = catalog_el.RPM_REPOS["cuda:rhel9"]
# What gpufleet-shaped-userland provides on the Rocky-shaped image.
USERLAND = {"/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash", "bash", "coreutils", "glibc", "shadow-utils",
            "systemd", "python3", "ca-certificates", "gnupg2", "kmod", "procps-ng", "util-linux", "sudo",
            "iproute", "gcc", "make", "rpm", "dnf", "python3-dnf", "dnf-plugins-core", "dracut"}


def _rpm(*args):
    return subprocess.run(["rpm"] + list(args), check=True, capture_output=True, text=True).stdout


def _rpms(built, group):
    return sorted(glob.glob(os.path.join(built, catalog_el.RPM_REPOS[group], "**", "*.rpm"), recursive=True))


def _modules(built):
    path, = glob.glob(os.path.join(built, RHEL9, "repodata", "*modules.yaml.gz"))
    with gzip.open(path, "rt") as handle:
        return list(yaml.safe_load_all(handle))


def test_the_driver_module_has_a_dkms_and_an_open_stream_per_branch(built):
    documents = _modules(built)
    streams = {d["data"]["stream"] for d in documents if d["document"] == "modulemd"}
    expected = {"%s-%s" % (b, kind) for b in catalog.EL_DRIVER_BRANCHES for kind in ("dkms", "open")}
    assert streams == expected | {"latest-dkms", "open-dkms"}
    defaults, = [d for d in documents if d["document"] == "modulemd-defaults"]
    assert defaults["data"]["stream"] == "open-dkms"


def test_every_artifact_is_a_package_of_the_repository(built):
    files = {os.path.basename(p) for p in _rpms(built, "cuda:rhel9")}
    for document in _modules(built):
        if document["document"] != "modulemd":
            continue
        data = document["data"]
        for nevra in data["artifacts"]["rpms"]:
            name, epoch_version, rest = re.match(r"^(.+)-(\d+:[^-]+)-(.+)$", nevra).groups()
            filename = "%s-%s-%s.rpm" % (name, epoch_version.split(":", 1)[1], rest)
            assert filename in files, (data["stream"], nevra)
        kmod = "kmod-nvidia-open-dkms" if data["stream"].endswith(("-open", "open-dkms")) else "kmod-nvidia-latest-dkms"
        other = "kmod-nvidia-latest-dkms" if kmod == "kmod-nvidia-open-dkms" else "kmod-nvidia-open-dkms"
        assert kmod in data["profiles"]["default"]["rpms"], data["stream"]
        assert not any(a.startswith(other + "-") for a in data["artifacts"]["rpms"]), data["stream"]
        # The fm profile adds Fabric Manager and NSCQ to the default one: named
        # per branch up to 570, without it from 580.
        branch = data["description"].split("driver version ")[1][:3]
        fm = ({"nvidia-fabricmanager", "libnvidia-nscq"} if int(branch) >= catalog.UNVERSIONED_FABRIC_MANAGER_FROM_BRANCH
              else {"nvidia-fabric-manager", "libnvidia-nscq-%s" % branch})
        assert set(data["profiles"]["fm"]["rpms"]) - set(data["profiles"]["default"]["rpms"]) == fm, data["stream"]


def test_driver_pieces_carry_epoch_3_and_the_el9_dist_tag(built):
    rpm = [p for p in _rpms(built, "cuda:rhel9") if os.path.basename(p).startswith("nvidia-driver-cuda-580.95.05")][0]
    assert _rpm("-qp", "--qf", "%{EPOCH}:%{VERSION}-%{RELEASE}", rpm) == "3:580.95.05-1.el9"


@pytest.mark.parametrize("group, key", sorted(catalog_el.RPM_REPO_KEYS.items()))
def test_packages_and_metadata_are_signed_by_the_repositorys_key(built, tmp_path, group, key):
    keyfile = {"cuda": "cuda-archive-key.asc", "rocky": "RPM-GPG-KEY-Rocky-9", "epel": "RPM-GPG-KEY-EPEL-9",
               "container-toolkit": "nvidia-container-toolkit-key.asc"}[key]
    keypath = os.path.join(built, "keys", keyfile)
    directory = os.path.join(built, catalog_el.RPM_REPOS[group])
    home = str(tmp_path / "gnupg")
    os.makedirs(home, mode=0o700)
    subprocess.run(["gpg", "--homedir", home, "--batch", "--import", keypath], check=True, capture_output=True)
    subprocess.run(["gpg", "--homedir", home, "--batch", "--verify", os.path.join(directory, "repodata", "repomd.xml.asc"),
                    os.path.join(directory, "repodata", "repomd.xml")], check=True, capture_output=True)
    dbpath = str(tmp_path / "rpmdb")
    _rpm("--dbpath", dbpath, "--initdb")
    _rpm("--dbpath", dbpath, "--import", keypath)
    rpms = _rpms(built, group)
    assert rpms
    checked = subprocess.run(["rpm", "--dbpath", dbpath, "-K"] + rpms, capture_output=True, text=True, check=False)
    if group in catalog_el.UNSIGNED_PACKAGES:
        signatures = _rpm("-qp", "--qf", "%{SIGPGP:pgpsig}|%{RSAHEADER:pgpsig}|%{DSAHEADER:pgpsig}\\n", *rpms)
        # The runtime package is shared with the signed rhel9 repository.
        unsigned = [line for line, path in zip(signatures.splitlines(), rpms) if "nvidia-sim-runtime" not in path]
        assert set(unsigned) == {"(none)|(none)|(none)"}
    else:
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert all(line.endswith("digests signatures OK") for line in checked.stdout.splitlines()), checked.stdout


def test_every_requirement_is_met_in_the_repositories_or_the_userland(built):
    rpms = [p for group in catalog_el.RPM_REPOS for p in _rpms(built, group)]
    provided = set(USERLAND)
    for line in _rpm("-qp", "--qf", "[%{PROVIDENAME}\\n]", *rpms).splitlines():
        provided.add(line)
    missing = set()
    for line in _rpm("-qp", "--qf", "[%{REQUIRENAME}\\n]", *rpms).splitlines():
        if not line.startswith("rpmlib(") and line not in provided:
            missing.add(line)
    assert not missing


def test_kernel_devel_is_found_by_the_name_dnf_is_asked_for():
    """dnf parses kernel-devel-<uname -r> at its last two dashes (Rocky's
    5.14.0-503.14.1.el9_5.x86_64 gives kernel-devel, 5.14.0, ...); the
    simulated package is named so that the machine's release parses the same."""
    for kernel in ("6.1.0-18-amd64", "6.18.44-fc-v1252", "6.8.0-60-generic"):
        package = catalog_el.kernel_devel(kernel, "el9")
        assert "%s-%s-%s" % (package.name, package.version, package.release) == "kernel-devel-" + kernel
        assert any(f.dest == "/usr/src/kernels/%s/Makefile" % kernel for f in package.files)


def _by_name(built):
    """{name: [(epoch:version-release, path)]} of the rhel9 repository."""
    found = {}
    for path in _rpms(built, "cuda:rhel9"):
        name, evr = _rpm("-qp", "--qf", "%{NAME} %|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}", path).split()
        found.setdefault(name, []).append((evr, path))
    return found


def test_toolkits_cudnn_and_dcgm_carry_nvidias_el_names(built):
    """NVIDIA's EL repository names the development packages -devel-
    (cuda-cudart-devel-12-8, libcudnn9-devel-cuda-12) where the apt ones say
    -dev-; DCGM keeps its Epoch 1, DCGM 3 (no Debian revision) gets release 1."""
    names = _by_name(built)
    for release in catalog.CUDA_RELEASES:
        xy = release["release"].replace(".", "-")
        assert [evr for evr, _path in names["cuda-toolkit-%s" % xy]] == [release["toolkit"] + "-1"]
        for name in ("cuda-cudart-devel-%s" % xy, "cuda-libraries-devel-%s" % xy):
            assert name in names, name
        assert "cuda-cudart-dev-%s" % xy not in names
    assert sorted(evr for evr, _path in names["libcudnn9-devel-cuda-12"]) == ["9.10.2.21-1", "9.13.0.50-1"]
    assert not [n for n in names if n.startswith("libcudnn9-dev-")]
    assert sorted(evr for evr, _path in names["datacenter-gpu-manager-4-core"]) == [
        "1:%s-1" % v for v in catalog.DCGM4_VERSIONS]
    assert [evr for evr, _path in names["datacenter-gpu-manager"]] == ["1:%s-1" % catalog.DCGM3_VERSION]


def test_cudnn_headers_sit_where_el_keeps_them_behind_alternatives(built):
    names = _by_name(built)
    _evr, devel = [e for e in names["libcudnn9-devel-cuda-12"] if e[0].startswith("9.10.")][0]
    _evr, runtime = [e for e in names["libcudnn9-cuda-12"] if e[0].startswith("9.10.")][0]
    assert set(_rpm("-qpl", devel).split()) == {"/usr/include/cudnn_v9.h", "/usr/include/cudnn_version_v9.h"}
    assert "/usr/lib64/libcudnn.so.9" in _rpm("-qpl", runtime).split()
    scripts = _rpm("-qp", "--scripts", devel)
    # chkconfig's alternatives (the shaped host's /usr/sbin/alternatives), not Debian's update-alternatives.
    assert re.search(r"(?m)^\s*alternatives --install /usr/include/cudnn\.h libcudnn /usr/include/cudnn_v9\.h", scripts)
    assert "update-alternatives" not in scripts


def test_no_toolkit_requires_a_driver_package(built):
    """The toolkit metas depend on no driver package, as NVIDIA's (a toolkit
    install must not bring a driver of another branch)."""
    names = _by_name(built)
    toolkit_rpms = [path for name, entries in names.items() if name.startswith(("cuda-", "libcudnn", "cudnn"))
                    for _evr, path in entries if not name.startswith("cuda-drivers")]
    required = set(_rpm("-qp", "--qf", "[%{REQUIRENAME}\\n]", *toolkit_rpms).split())
    assert not [r for r in required if r.startswith(("nvidia-", "kmod-", "libnvidia", "cuda-drivers"))], required

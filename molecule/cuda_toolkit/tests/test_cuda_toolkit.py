"""CUDA toolkits side by side, the default through the alternatives system,
the environment for every user, and no driver package brought in."""
import json
import re

import pytest
from gpufleet_packages import installed, is_el

TOOLKITS = ("12.8", "13.0")
DEFAULT = "12.8"
# The simulated repository's releases (tests/nvidia_sim/repo/catalog.py).
NVCC = {"12.8": "12.8.93", "13.0": "13.0.88"}
DRIVER_PACKAGE = re.compile(r"^(nvidia-driver|cuda-drivers|nvidia-open|nvidia-kernel|libcuda1|libnvidia-compute|nvidia-smi)")


def host_vars(host):
    return host.ansible.get_variables()


def facts(host):
    return json.loads(host.file("/var/lib/gpufleet-test/cuda_toolkit_facts.json").content_string)


@pytest.mark.parametrize("version", TOOLKITS)
def test_toolkit_package_installed_side_by_side(host, version):
    pkg = host.package("cuda-toolkit-%s" % version.replace(".", "-"))
    assert pkg.is_installed
    assert pkg.version.startswith(version + ".")
    assert host.file("/usr/local/cuda-%s" % version).is_directory


@pytest.mark.parametrize("version", TOOLKITS)
def test_each_nvcc_reports_its_release(host, version):
    out = host.check_output("/usr/local/cuda-%s/bin/nvcc --version" % version)
    assert "Cuda compilation tools, release %s, V%s" % (version, NVCC[version]) in out


def alternatives(host, group):
    """The link group's admin file, as Debian's update-alternatives and EL's
    alternatives both write it: mode, link, a blank line, each member and its
    priority (no slaves in the toolkit groups)."""
    admin = "/var/lib/alternatives" if is_el(host) else "/var/lib/dpkg/alternatives"
    lines = host.file("%s/%s" % (admin, group)).content_string.splitlines()
    members = [line for line in lines[lines.index("") + 1:] if line][::2]
    return {"mode": lines[0], "link": lines[1], "members": members}


def test_default_is_the_cuda_alternative_in_manual_mode(host):
    group = alternatives(host, "cuda")
    assert group["link"] == "/usr/local/cuda"
    assert group["mode"] == "manual"
    assert sorted(group["members"]) == ["/usr/local/cuda-%s" % v for v in TOOLKITS]
    assert host.file("/etc/alternatives/cuda").linked_to == "/usr/local/cuda-%s" % DEFAULT
    link = host.file("/usr/local/cuda")
    assert link.is_symlink and link.linked_to == "/usr/local/cuda-%s" % DEFAULT
    assert host.file("/usr/local/cuda").linked_to == host.file("/etc/alternatives/cuda").linked_to


def test_default_nvcc_through_usr_local_cuda(host):
    out = host.check_output("/usr/local/cuda/bin/nvcc --version")
    assert "release %s, V%s" % (DEFAULT, NVCC[DEFAULT]) in out


def test_profile_puts_the_default_first_for_login_shells(host):
    profile = host.file("/etc/profile.d/cuda.sh")
    assert profile.mode == 0o644 and profile.user == "root"
    login = host.run("env -i HOME=/root TERM=dumb bash -lc 'command -v nvcc; echo \"$CUDA_HOME\"; echo \"$PATH\"'")
    assert login.rc == 0, login.stderr
    nvcc, cuda_home, path = login.stdout.splitlines()[-3:]
    assert nvcc == "/usr/local/cuda/bin/nvcc"
    assert cuda_home == "/usr/local/cuda"
    assert path.split(":").count("/usr/local/cuda/bin") == 1
    # Sourcing it twice must not grow PATH.
    twice = host.check_output("env -i PATH=/usr/bin:/bin sh -c '. /etc/profile.d/cuda.sh; . /etc/profile.d/cuda.sh; echo $PATH'")
    assert twice == "/usr/local/cuda/bin:/usr/bin:/bin"
    # A user's own CUDA_HOME wins.
    own = host.check_output("env -i CUDA_HOME=/opt/mycuda sh -c '. /etc/profile.d/cuda.sh; echo $CUDA_HOME'")
    assert own == "/opt/mycuda"


def test_dynamic_linker_reads_lib64_of_the_default(host):
    conf = host.file("/etc/ld.so.conf.d/cuda.conf")
    entries = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert entries == ["/usr/local/cuda/lib64"]
    # ldconfig names a directory by the first of its paths it reads (NVIDIA's
    # 000_cuda.conf names the same directory as targets/x86_64-linux/lib).
    scan = host.run("ldconfig -v -N -X")
    scanned = re.findall(r"(?m)^(/\S+):", scan.stdout)
    resolved = host.check_output("readlink -f %s" % " ".join(scanned)).splitlines()
    assert host.check_output("readlink -f /usr/local/cuda/lib64") in resolved, scan.stderr
    assert host.file("/usr/local/cuda/lib64").linked_to == "/usr/local/cuda-%s/targets/x86_64-linux/lib" % DEFAULT


def test_no_driver_package_came_with_the_toolkits(host):
    # The driver role installed the driver; every driver package must be of
    # that one driver version, and none may be a dependency of a toolkit.
    toolkits = " ".join("cuda-toolkit-%s" % v.replace(".", "-") for v in TOOLKITS)
    if is_el(host):
        # The installed packages the toolkits need, all the way down.
        closure = host.run("dnf -q repoquery --installed --requires --resolve --recursive --qf '%%{name}' %s" % toolkits)
        assert closure.rc == 0, closure.stderr
        pulled = {name for name in closure.stdout.split() if DRIVER_PACKAGE.match(name)}
    else:
        rdeps = host.run("apt-cache depends --recurse --no-recommends --no-suggests --installed %s" % toolkits)
        assert rdeps.rc == 0, rdeps.stderr
        pulled = {m for m in re.findall(r"(?m)^\s*(?:Depends|PreDepends): <?([^\s>]+)>?", rdeps.stdout)
                  if DRIVER_PACKAGE.match(m)}
    assert pulled == set()
    branch = host_vars(host)["nvidia_driver_branch"]
    drivers = {name: version for name, version in installed(host).items() if DRIVER_PACKAGE.match(name)}
    assert drivers
    # "[epoch:]version-revision": the driver's version after any epoch.
    assert all(v.split(":")[-1].startswith(branch + ".") for v in drivers.values()), drivers


def test_forward_compatibility_only_where_asked(host):
    wanted = host_vars(host).get("cuda_toolkit_forward_compat", False)
    compat = host.package("cuda-compat-13-0")
    assert compat.is_installed is bool(wanted)
    assert not host.package("cuda-compat-12-8").is_installed
    if wanted:
        assert host.file("/usr/local/cuda-13.0/compat/libcuda.so.1").is_symlink
        # Applications opt in through LD_LIBRARY_PATH: not system-wide.
        assert "/compat" not in host.check_output("cat /etc/ld.so.conf.d/*.conf")
    assert facts(host)["forward_compat"] == (["13.0"] if wanted else [])


def test_facts_describe_the_host(host):
    recorded = facts(host)
    assert recorded["installed"] == list(TOOLKITS)
    assert recorded["default"] == DEFAULT
    assert recorded["home"] == "/usr/local/cuda-%s" % DEFAULT
    assert recorded["nvcc"] == NVCC

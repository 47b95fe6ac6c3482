"""The nvidia_driver role's end state, per concern, read on the converged hosts."""
import csv
import io
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
from host_checks import keyring_primary_fingerprints  # noqa: E402  pylint: disable=wrong-import-position,import-error

KEYRING = "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc"
SOURCE = "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
PIN = "/etc/apt/preferences.d/gpufleet-nvidia-driver.pref"
# The Rocky-shaped host (dnf): the repository's key file and .repo file.
RPM_KEY = "/etc/pki/rpm-gpg/RPM-GPG-KEY-gpufleet-nvidia-cuda"
REPO_FILE = "/etc/yum.repos.d/gpufleet-nvidia-cuda.repo"
VERSIONLOCK = "/etc/dnf/plugins/versionlock.list"

# The packages that tell the driver's version and flavour, per packaging: NVIDIA's
# Debian pieces, NVIDIA's Ubuntu tree (branch-named), Canonical's server branch
# (the Ubuntu-shaped hosts' simulated archive). {b}: branch, {o}: "-open" or "".
PACKAGING = {
    "nvidia-debian": {
        "version": "nvidia-driver",
        "module": {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"},
        "held": {"nvidia-driver", "nvidia-smi", "libcuda1", "libnvidia-ml1"},
        "pinned": "nvidia-driver libcuda1",
    },
    "nvidia-ubuntu": {
        "version": "nvidia-utils-{b}",
        "module": {"open": "nvidia-dkms-{b}-open", "proprietary": "nvidia-dkms-{b}"},
        "held": {"nvidia-driver-{b}{o}", "nvidia-utils-{b}", "libnvidia-compute-{b}"},
        "pinned": "nvidia-utils-{b} libnvidia-compute-{b}",
    },
    "distribution-ubuntu": {
        "version": "nvidia-utils-{b}-server",
        # The prebuilt, Canonical-signed module of the kernel flavour.
        "module": {"open": "linux-modules-nvidia-{b}-server-open-generic",
                   "proprietary": "linux-modules-nvidia-{b}-server-generic"},
        "held": {"nvidia-headless-no-dkms-{b}-server{o}", "nvidia-utils-{b}-server",
                 "libnvidia-compute-{b}-server", "nvidia-kernel-common-{b}-server"},
        "pinned": "nvidia-utils-{b}-server libnvidia-compute-{b}-server",
    },
    # NVIDIA's rhel9 repository (the Rocky-shaped host): Epoch 3 pieces, the
    # kmod package of the flavour; the branch is a module stream, the holds
    # are dnf versionlock entries.
    "nvidia-el": {
        "version": "nvidia-driver-cuda",
        "module": {"open": "kmod-nvidia-open-dkms", "proprietary": "kmod-nvidia-latest-dkms"},
        "held": {"nvidia-driver", "nvidia-driver-cuda", "libnvidia-ml", "nvidia-kmod-common"},
        "pinned": None,
    },
}


@pytest.fixture(scope="module")
def expected(host):
    variables = host.ansible.get_variables()
    source = variables.get("nvidia_driver_source", "nvidia")
    ubuntu = any(group.startswith("ubuntu") for group in variables["group_names"])
    el = any(group.startswith("rocky") for group in variables["group_names"])
    branch = str(variables["nvidia_driver_branch"])
    flavour = variables["nvidia_driver_flavour"]
    packaging = PACKAGING["%s-%s" % (source, "ubuntu" if ubuntu else "el" if el else "debian")]

    def name(template):
        return template.format(b=branch, o="-open" if flavour == "open" else "") if template else None

    return {
        "source": source,
        "ubuntu": ubuntu,
        "el": el,
        "version_package": name(packaging["version"]),
        "module_packages": {key: name(value) for key, value in packaging["module"].items()},
        "held": {name(value) for value in packaging["held"]},
        "pinned": name(packaging["pinned"]),
        "branch": branch,
        "flavour": flavour,
        "hardening": bool(variables.get("nvidia_driver_device_file_hardening", False)),
        "module_options": variables.get("nvidia_driver_module_options", {}),
        "gpus": int(variables["nvidia_driver_expected_gpu_count"]),
    }


@pytest.fixture(scope="module")
def repo_fingerprint():
    # Written by the harness next to the key it signs the repository with.
    repo_dir = os.environ.get("GPUFLEET_TEST_REPO_DIR", "/var/tmp/gpufleet-harness/repo")
    with open(os.path.join(repo_dir, "keys", "fingerprint")) as handle:
        return handle.read().strip().upper()


@pytest.fixture(scope="module")
def installed_driver(host, expected):
    return host.package(expected["version_package"]).version.split("-")[0]


@pytest.fixture(scope="module")
def nvidia_repository(expected):
    if expected["source"] != "nvidia":
        pytest.skip("nvidia_driver_source is %s: no NVIDIA repository is configured" % expected["source"])


def files_naming(host, url, *places):
    """The files below places that name the repository's URL: one source per
    repository (two are what break apt, and make dnf read it twice)."""
    return host.run("grep -rlF %s " + " ".join(["%s"] * len(places)), url.rstrip("/"), *places).stdout.split()


@pytest.fixture(scope="module")
def apt_host(expected):
    if expected["el"]:
        pytest.skip("dnf host: its twin is the test_el_* test of the same concern")


@pytest.fixture(scope="module")
def dnf_host(expected):
    if not expected["el"]:
        pytest.skip("apt host: the test_el_* tests are the dnf hosts' twins")


# --- repository -----------------------------------------------------------

@pytest.mark.usefixtures("apt_host")
@pytest.mark.usefixtures("nvidia_repository")
def test_keyring_is_the_pinned_key(host, repo_fingerprint):
    keyring = host.file(KEYRING)
    assert keyring.exists and keyring.user == "root" and keyring.mode == 0o644
    assert keyring_primary_fingerprints(host, KEYRING) == [repo_fingerprint]


@pytest.mark.usefixtures("apt_host")
@pytest.mark.usefixtures("nvidia_repository")
def test_source_is_signed_by_the_keyring_only(host):
    source = host.file(SOURCE).content_string
    assert "Signed-By: %s" % KEYRING in source
    assert "Trusted" not in source
    assert not host.file("/etc/apt/trusted.gpg").exists
    assert not host.package("cuda-keyring").is_installed
    # No other source for the same repository (that is what breaks apt).
    uri = re.search(r"^URIs: (\S+)", source, re.M).group(1)
    assert files_naming(host, uri, "/etc/apt/sources.list", "/etc/apt/sources.list.d") == [SOURCE]


@pytest.mark.usefixtures("apt_host")
def test_apt_verifies_the_repository(host):
    update = host.run("apt-get update -o APT::Update::Error-Mode=any")
    assert update.rc == 0, update.stderr


# --- packages -------------------------------------------------------------

def test_requested_branch_and_flavour_are_installed(host, expected, installed_driver):
    assert installed_driver.split(".")[0] == expected["branch"]
    assert host.package(expected["module_packages"][expected["flavour"]]).is_installed
    other = "proprietary" if expected["flavour"] == "open" else "open"
    assert not host.package(expected["module_packages"][other]).is_installed
    if expected["flavour"] == "proprietary" and expected["source"] == "nvidia" and not expected["ubuntu"]:
        # NVIDIA's EL repository has the stream, Debian's the branch meta.
        assert host.package("cuda-drivers" if expected["el"] else "cuda-drivers-%s" % expected["branch"]).is_installed


def test_canonical_prebuilt_module_without_dkms(host, expected, installed_driver):
    """Ubuntu's own packages: the module comes prebuilt and signed for the
    installed kernel flavour's kernel (simulated linux-restricted-modules), so
    neither DKMS nor the graphics stack nor the X server driver is installed."""
    if expected["source"] != "distribution" or not expected["ubuntu"]:
        pytest.skip("Canonical's prebuilt modules are Ubuntu's nvidia_driver_source: distribution")
    suffix = "-open" if expected["flavour"] == "open" else ""
    abi = host.check_output(r"dpkg-query -W -f='${Depends}' linux-image-generic")
    abi = re.search(r"linux-image-(\d+\.\d+\.\d+-\d+-generic)", abi).group(1)
    module = "linux-modules-nvidia-%s-server%s-%s" % (expected["branch"], suffix, abi)
    assert host.package(module).is_installed
    assert host.file("/lib/modules/%s/kernel/nvidia-%ssrv/nvidia.ko" % (abi, expected["branch"])).exists
    for absent in ("dkms", "nvidia-dkms-%s-server%s" % (expected["branch"], suffix),
                   "nvidia-driver-%s-server%s" % (expected["branch"], suffix),
                   "xserver-xorg-video-nvidia-%s-server" % expected["branch"]):
        assert not host.package(absent).is_installed, absent
    # The flavour's meta package follows the kernel: never held, never pinned.
    meta = expected["module_packages"][expected["flavour"]]
    assert meta not in host.check_output("apt-mark showhold").split()


@pytest.mark.usefixtures("apt_host")
def test_driver_packages_are_held_at_one_version(host, expected, installed_driver):
    held = set(host.check_output("apt-mark showhold").split())
    listing = host.check_output(r"dpkg-query -W -f='${Package} ${Version}\n' 'nvidia-*' 'libnvidia-*' 'libcuda*'")
    driver_packages = {}
    for line in listing.splitlines():
        name, _unused, version = line.partition(" ")
        if re.match(r"^[0-9]{3,4}\.", version):
            driver_packages[name] = version.split("-")[0]
    assert expected["held"] <= set(driver_packages)
    assert set(driver_packages) <= held, "not held: %s" % sorted(set(driver_packages) - held)
    assert set(driver_packages.values()) == {installed_driver}


@pytest.mark.usefixtures("apt_host")
def test_driver_version_is_pinned(host, expected, installed_driver):
    pin = host.file(PIN).content_string
    assert "Pin: version %s-*" % installed_driver in pin
    assert "Pin-Priority: 1000" in pin
    # apt agrees: the installed version is every piece's candidate.
    policy = host.check_output("apt-cache policy %s" % expected["pinned"])
    assert policy.count("Candidate: %s-" % installed_driver) == 2


@pytest.mark.usefixtures("apt_host")
def test_unattended_upgrades_stay_away(host):
    config = host.file("/etc/apt/apt.conf.d/51gpufleet-nvidia-unattended-upgrades").content_string
    assert "Unattended-Upgrade::Package-Blacklist" in config
    for pattern in ("nvidia-", "libnvidia-", "libcuda1", "cuda-drivers"):
        assert '"%s";' % pattern in config
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"libnvidia-"' in dump


# --- the dnf twins (Rocky-shaped host: Debian's real dnf, rpm, versionlock) --

@pytest.mark.usefixtures("nvidia_repository", "dnf_host")
def test_el_repository_key_is_the_pinned_key(host, repo_fingerprint):
    key = host.file(RPM_KEY)
    assert key.exists and key.user == "root" and key.mode == 0o644
    assert keyring_primary_fingerprints(host, RPM_KEY) == [repo_fingerprint]
    # rpm_key imported it: rpm names an imported key gpg-pubkey-<short id>.
    imported = host.check_output("rpm -q gpg-pubkey --qf '%{VERSION}\\n'").split()
    assert repo_fingerprint[-8:].lower() in imported


@pytest.mark.usefixtures("nvidia_repository", "dnf_host")
def test_el_repository_checks_packages_with_that_key_only(host):
    repo = host.file(REPO_FILE).content_string
    assert re.search(r"^gpgcheck\s*=\s*1$", repo, re.M)
    assert re.search(r"^gpgkey\s*=\s*file://%s$" % re.escape(RPM_KEY), repo, re.M)
    baseurl = re.search(r"^baseurl\s*=\s*(\S+)$", repo, re.M).group(1)
    assert files_naming(host, baseurl, "/etc/yum.repos.d") == [REPO_FILE]


@pytest.mark.usefixtures("dnf_host")
def test_el_dnf_reads_every_repository(host):
    makecache = host.run("dnf -q makecache")
    assert makecache.rc == 0, makecache.stderr


@pytest.mark.usefixtures("dnf_host")
def test_el_branch_is_the_enabled_module_stream(host, expected):
    """NVIDIA's guide: the branch is the nvidia-driver module stream
    (<branch>-dkms proprietary, <branch>-open open) on RHEL 9."""
    stream = "%s-%s" % (expected["branch"], "open" if expected["flavour"] == "open" else "dkms")
    enabled = host.check_output("dnf -q module list --enabled nvidia-driver")
    assert re.search(r"^nvidia-driver\s+%s \[e\]" % re.escape(stream), enabled, re.M), enabled


@pytest.mark.usefixtures("dnf_host")
def test_el_driver_packages_are_versionlocked_at_one_version(host, expected, installed_driver):
    listing = host.check_output("rpm -qa --qf '%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'")
    driver_packages = {}
    for line in listing.splitlines():
        name, evr = line.split()
        version = evr.split(":", 1)[1]
        if re.match(r"^(nvidia-|libnvidia-|kmod-nvidia|cuda-drivers)", name) and re.match(r"^[0-9]{3,4}\.", version):
            driver_packages[name] = evr
    assert expected["held"] | {expected["module_packages"][expected["flavour"]]} <= set(driver_packages)
    assert {evr.split(":", 1)[1].split("-")[0] for evr in driver_packages.values()} == {installed_driver}
    # dnf versionlock's own format, one line per package: name-epoch:version-release.*
    # (the plugin writes the epoch even when it is 0).
    locks = [line for line in host.file(VERSIONLOCK).content_string.splitlines()
             if line.strip() and not line.startswith("#")]
    for name, evr in driver_packages.items():
        assert "%s-%s.*" % (name, evr) in locks, "%s not locked (%s)" % (name, locks)
    # dnf itself keeps them: no newer driver is offered for them.
    listed = host.check_output("dnf -q versionlock list")
    assert "%s-" % expected["module_packages"][expected["flavour"]] in listed


@pytest.mark.usefixtures("dnf_host")
def test_el_initramfs_was_rebuilt_by_dracut_with_the_blacklist(host):
    """Real dracut (Debian's, host-only as Rocky's): the nouveau blacklist is in the image."""
    kernel = host.check_output("uname -r")
    image = "/boot/initramfs-%s.img" % kernel
    assert host.file(image).exists
    content = host.check_output("lsinitrd %s", image)
    assert "etc/modprobe.d/gpufleet-blacklist-nouveau.conf" in content


# --- kernel modules -------------------------------------------------------

def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").content_string
    assert re.search(r"^blacklist nouveau$", blacklist, re.M)
    assert re.search(r"^options nouveau modeset=0$", blacklist, re.M)


def test_nvidia_uvm_loads_at_boot(host):
    lines = host.file("/etc/modules-load.d/gpufleet-nvidia-uvm.conf").content_string.splitlines()
    assert "nvidia-uvm" in [line.strip() for line in lines if not line.startswith("#")]


def test_module_options_are_in_one_managed_file(host, expected):
    path = "/etc/modprobe.d/gpufleet-nvidia.conf"
    if not expected["hardening"] and not expected["module_options"]:
        assert not host.file(path).exists
        return
    options = [line for line in host.file(path).content_string.splitlines() if line.startswith("options ")]
    assert len(options) == 1 and options[0].startswith("options nvidia ")
    values = dict(item.split("=", 1) for item in options[0].split()[2:])
    for name, value in expected["module_options"].get("nvidia", {}).items():
        assert values[name] == str(value)
    if expected["hardening"]:
        gid = host.group("nvidia").gid
        assert values["NVreg_DeviceFileMode"] == "0660"
        assert values["NVreg_DeviceFileGID"] == str(gid)
        assert values["NVreg_DeviceFileUID"] == "0"
        assert values["NVreg_RestrictProfilingToAdminUsers"] == "1"


def test_dkms_module_is_installed_for_the_running_kernel(host, expected, installed_driver):
    if expected["source"] == "distribution" and expected["ubuntu"]:
        pytest.skip("the module is Canonical's prebuilt one (test_canonical_prebuilt_module_without_dkms)")
    kernel = host.check_output("uname -r")
    status = host.check_output("dkms status")
    assert re.search(r"^nvidia[/,] ?%s, %s, x86_64: installed" % (re.escape(installed_driver), re.escape(kernel)),
                     status, re.M), status


# --- the driver in use ----------------------------------------------------

def test_loaded_driver_is_the_installed_one(host, installed_driver):
    assert host.file("/run/nvidia-sim/loaded-driver").content_string.strip() == installed_driver
    assert not host.file("/run/reboot-required").exists


def test_nvidia_smi_reports_the_branch_on_every_gpu(host, expected):
    out = host.check_output("nvidia-smi --query-gpu=index,driver_version --format=csv,noheader")
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert len(rows) == expected["gpus"]
    assert {row[1].split(".")[0] for row in rows} == {expected["branch"]}

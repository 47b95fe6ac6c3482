"""nvidia_driver_source: distribution with Debian's real packages, read on the converged hosts."""
import json
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
import unattended_upgrades  # noqa: E402  pylint: disable=wrong-import-position,import-error

SOURCE = "/etc/apt/sources.list.d/gpufleet-debian-nonfree.sources"
PIN = "/etc/apt/preferences.d/gpufleet-nvidia-driver.pref"
PACKAGES = ["nvidia-kernel-dkms", "firmware-nvidia-gsp", "nvidia-smi", "libnvidia-ml1", "libcuda1", "nvidia-persistenced"]


@pytest.fixture(scope="module")
def branch(host):
    return str(host.ansible.get_variables()["nvidia_driver_branch"])


def _version(host, name):
    return host.check_output("dpkg-query -W -f='${Version}' %s" % name)


def test_the_source_adds_the_components_with_debians_keyring_and_no_nvidia_repository(host):
    text = host.file(SOURCE).content_string
    assert "Components: contrib non-free non-free-firmware" in text
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in text
    assert not host.file("/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").exists
    assert not host.file("/etc/apt/keyrings/gpufleet-nvidia-cuda.asc").exists


def test_debians_packages_are_installed_held_and_pinned(host, branch):
    driver = _version(host, "nvidia-kernel-dkms")
    assert driver.startswith(branch + ".")
    upstream = re.sub(r"-[^-]*$", "", driver)
    for name in PACKAGES:
        assert host.package(name).is_installed, name
    for name in PACKAGES[:-1]:
        assert _version(host, name).startswith(upstream + "-"), name
    # nvidia-persistenced has its own version and is held all the same.
    held = host.check_output("apt-mark showhold").split()
    for name in PACKAGES:
        assert name in held, name
    assert "Pin: version %s-*" % upstream in host.file(PIN).content_string
    assert not host.package("nvidia-driver").is_installed


def test_dkms_built_the_module_for_the_installed_debian_kernel(host, branch):
    kernels = host.check_output("ls /lib/modules/*/build -d | cut -d/ -f4").split()
    status = host.check_output("dkms status")
    for kernel in kernels:
        assert re.search(r"^nvidia[^,/]*[/,] ?%s[.][0-9.]+, %s, [^:]+: installed" % (branch, re.escape(kernel)), status, re.M), status


def test_the_real_nvidia_smi_cannot_reach_a_driver(host):
    result = host.run("nvidia-smi")
    assert result.rc == 9, (result.rc, result.stdout)
    assert "couldn't communicate with the NVIDIA driver" in result.stdout


def test_debians_nouveau_blacklist_and_persistenced_unit(host):
    assert host.file("/run/reboot-required").exists
    assert host.run("systemctl cat nvidia-persistenced.service").rc == 0
    assert host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").exists


def test_the_real_initramfs_of_every_kernel_carries_the_nouveau_blacklist(host):
    """update-initramfs (initramfs-tools, real) ran after the role wrote modprobe.d: the image the kernel
    boots with blacklists nouveau before the root filesystem is mounted."""
    kernels = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p'").split()
    assert kernels, "prepare installs a kernel"
    for kernel in kernels:
        listing = host.check_output("lsinitramfs /boot/initrd.img-%s" % kernel).split()
        assert "etc/modprobe.d/gpufleet-blacklist-nouveau.conf" in listing, (kernel, [p for p in listing if "modprobe" in p])
        blacklist = host.check_output(
            "d=$(mktemp -d) && unmkinitramfs /boot/initrd.img-%s \"$d\" "
            " && cat $(find \"$d\" -path '*/etc/modprobe.d/gpufleet-blacklist-nouveau.conf')"
            "; rm -rf \"$d\"" % kernel)
        assert "blacklist nouveau" in blacklist and "options nouveau modeset=0" in blacklist, blacklist


def test_the_kernel_hold_covers_the_metapackages_that_bring_new_kernels(host):
    """nvidia_driver_hold_kernel (on for the Debian 13 node only): apt upgrade and unattended-upgrades cannot
    install a new linux-image-<abi> through linux-image-cloud-amd64 any more."""
    held = set(host.check_output("apt-mark showhold").split())
    listing = host.run("dpkg-query -W -f '${Package} ${Status}\\n' 'linux-image-*' 'linux-headers-*' 'linux-kbuild-*'").stdout
    kernel_packages = {line.split()[0] for line in listing.splitlines() if line.endswith(" install ok installed")
                       or line.endswith(" hold ok installed")}
    assert kernel_packages, "prepare installs a kernel"
    if host.ansible.get_variables().get("nvidia_driver_hold_kernel"):
        assert {"linux-image-cloud-amd64", "linux-headers-cloud-amd64"} <= kernel_packages, kernel_packages
        assert kernel_packages <= held, kernel_packages - held
    else:
        assert not kernel_packages & held, kernel_packages & held


# A local repository that offers what a mirror would after the converge: a
# newer driver of the branch and newer kernel metapackages (test doubles,
# never meant to be installed), and a control package that unattended-upgrades
# must upgrade, which shows that it runs and takes that repository.
UPDATES = "/srv/gpufleet-test/updates"
UPDATES_SOURCE = "/etc/apt/sources.list.d/gpufleet-test-updates.sources"
UU_CONFIG = "/etc/apt/apt.conf.d/52gpufleet-test-unattended-upgrades"
CONTROL = "gpufleet-test-control"
BUILD_REPOSITORY = r'''
import glob, hashlib, json, os, subprocess, sys, tempfile, time
root, offers = sys.argv[1], json.loads(sys.argv[2])
os.makedirs(root, exist_ok=True)
for name, version, depends in offers:
    work = tempfile.mkdtemp()
    os.makedirs(work + "/DEBIAN")
    with open(work + "/DEBIAN/control", "w") as handle:
        handle.write("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: gpufleet tests <tests@gpufleet.invalid>\n"
                     "%sDescription: gpufleet.nvidia test double offered as an update\n"
                     % (name, version, ("Depends: %s\n" % depends) if depends else ""))
    subprocess.run(["dpkg-deb", "-Zgzip", "--build", work, "%s/%s_%s_all.deb" % (root, name, version.replace(":", "%3a"))],
                   check=True, stdout=subprocess.DEVNULL)
entries = []
for deb in sorted(glob.glob(root + "/*.deb")):
    data = open(deb, "rb").read()
    fields = subprocess.check_output(["dpkg-deb", "-f", deb]).decode().rstrip("\n")
    entries.append("%s\nFilename: ./%s\nSize: %d\nSHA256: %s\n" % (fields, os.path.basename(deb), len(data),
                                                                   hashlib.sha256(data).hexdigest()))
packages = "\n".join(entries).encode()
open(root + "/Packages", "wb").write(packages)
open(root + "/Release", "w").write(
    "Origin: gpufleet-test-updates\nLabel: gpufleet test updates\nDate: %s\nSHA256:\n %s %d Packages\n"
    % (time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), hashlib.sha256(packages).hexdigest(), len(packages)))
'''


def _newer_upstream(version):
    """535.247.01-1~deb12u1 -> 535.248.01-1: the next release of the branch, as a mirror would offer it."""
    upstream = re.sub(r"-[^-]*$", "", version.split(":")[-1])
    major, minor = upstream.split(".")[:2]
    return "%s.%d.01-1" % (major, int(minor) + 1)


def test_unattended_upgrades_take_the_repository_but_not_the_driver_or_a_held_kernel(host, branch):
    """Debian's real unattended-upgrades, allowed everything a repository offers (a newer driver of the branch,
    newer kernel metapackages): it upgrades the control package, and leaves the driver at its pinned release and,
    with nvidia_driver_hold_kernel, the kernel metapackages at theirs."""
    hold_kernel = bool(host.ansible.get_variables().get("nvidia_driver_hold_kernel"))
    driver = _version(host, "nvidia-kernel-dkms")
    offers = [[CONTROL, "1", ""], [CONTROL, "2", ""], ["nvidia-kernel-dkms", _newer_upstream(driver), ""]]
    kernel_metas = ["linux-image-cloud-amd64", "linux-headers-cloud-amd64"] if hold_kernel else []
    before = dict((name, _version(host, name)) for name in ["nvidia-kernel-dkms"] + PACKAGES + kernel_metas)
    for name in kernel_metas:
        depends = host.check_output("dpkg-query -W -f='${Depends}' %s" % name)
        offers.append([name, before[name] + "+gpufleet1", depends])
    try:
        host.run_expect([0], "python3 -c %s %s %s" % (_quote(BUILD_REPOSITORY), UPDATES, _quote(json.dumps(offers))))
        host.run_expect([0], "printf 'Types: deb\\nURIs: file:%s\\nSuites: /\\nTrusted: yes\\n' > %s" % (UPDATES, UPDATES_SOURCE))
        host.run_expect([0], "printf '#clear Unattended-Upgrade::Origins-Pattern;\\n#clear Unattended-Upgrade::Allowed-Origins;\\n"
                             "Unattended-Upgrade::Origins-Pattern { \"origin=gpufleet-test-updates\"; };\\n' > %s" % UU_CONFIG)
        host.run_expect([0], "apt-get update -qq -o Dir::Etc::SourceList=%s -o Dir::Etc::SourceParts=- "
                             "-o APT::Get::List-Cleanup=0" % UPDATES_SOURCE)
        host.run_expect([0], "apt-get install -y -q %s=1" % CONTROL)
        offered = host.check_output("LC_ALL=C apt-cache madison nvidia-kernel-dkms %s" % " ".join(kernel_metas))
        for name, version, _depends in offers[2:]:
            assert version in offered, (name, version, offered)

        dry = host.run("unattended-upgrade --dry-run -d 2>&1")
        assert dry.rc == 0, dry.stdout[-3000:]
        allowed = re.search(r"(?m)^Allowed origins are: (.*)$", dry.stdout)
        assert allowed and allowed.group(1).strip() == "origin=gpufleet-test-updates", unattended_upgrades.summary(dry.stdout)
        wanted = unattended_upgrades.candidates(dry.stdout)
        assert CONTROL in wanted, unattended_upgrades.summary(dry.stdout)
        assert not [name for name in wanted if re.match(r"(lib)?nvidia-|libcuda|linux-", name)], wanted

        real = host.run("unattended-upgrade -d 2>&1")
        assert real.rc == 0, unattended_upgrades.summary(real.stdout)
        assert _version(host, CONTROL) == "2"
        after = dict((name, _version(host, name)) for name in before)
        assert after == before, (before, after)
        assert set(before) <= set(host.check_output("apt-mark showhold").split())
        assert host.run("dpkg --audit").stdout.strip() == ""
    finally:
        host.run("apt-get purge -y -q %s; rm -rf %s %s %s /var/lib/apt/lists/_srv_gpufleet-test_updates_*"
                 % (CONTROL, UPDATES, UPDATES_SOURCE, UU_CONFIG))


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"

"""nvidia_driver_source: distribution with Debian's real packages, read on the converged hosts."""
import re

import pytest

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

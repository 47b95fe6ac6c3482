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

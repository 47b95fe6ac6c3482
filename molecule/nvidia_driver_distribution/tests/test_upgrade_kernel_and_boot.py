"""The kernel boundary on the Debian 12 node, with Debian's real kernels, DKMS, initramfs-tools and a real boot.

Runs after the scenario's converge and the read-only checks of
test_nvidia_driver_distribution.py (file order), and changes the node:

1. the node, converged with Debian's real 535 packages, boots its own kernel
   (6.1.0-56-cloud-amd64) and initramfs under QEMU: systemd reaches
   multi-user.target, nouveau stays out, and "modprobe nvidia" loads the
   module DKMS built and fails only for want of a GPU ("No such device");
2. a newer kernel (6.1.0-57-cloud-amd64, the archive's newest) is installed
   while the repositories do not offer its headers (an apt pin at -1 stands
   for a mirror that dropped them): the role refuses, naming the kernel the
   node would boot without a driver, and the health module reports it;
3. with the headers offered again the role installs them, DKMS builds the
   module for the new kernel, and the first kernel's initramfs is untouched;
4. the node boots the new kernel, the bootloader's default, with the driver.

Real: kernels, headers, DKMS and its build of NVIDIA's module, initramfs-tools,
the boot, the module load. Simulated: nothing here; there is no GPU, which is
why the load ends at "No such device".
"""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "_shared"))
import vm_boot  # noqa: E402  pylint: disable=wrong-import-position,import-error

HOST = "nvidia_driver_distribution-debian12"
testinfra_hosts = [HOST]
SCENARIO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT_DIR = os.path.dirname(os.path.dirname(SCENARIO_DIR))
BIN = os.path.join(PROJECT_DIR, ".venv", "bin")
INVENTORY = os.path.dirname(os.environ.get("MOLECULE_INVENTORY_FILE", "/nonexistent/x"))
WORK = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/gpufleet-kernel"), "kernel")
NO_HEADERS_PIN = "/etc/apt/preferences.d/gpufleet-test-no-headers.pref"
# What a module that does not fit the kernel, or is missing, makes modprobe say.
WRONG_MODULE = re.compile(r"not found|Invalid module format|Exec format error|Unknown symbol|Key was rejected|"
                          r"disagrees about version", re.I)


@pytest.fixture(scope="module")
def releases(host):
    installed = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p'").split()
    new = host.ansible.get_variables()["kernel_upgrade_release"]
    assert len(installed) == 1 and installed[0] != new, installed
    return installed[0], new


def sh(command, check=True, timeout=900):
    proc = subprocess.run(["docker", "exec", HOST, "sh", "-c", command], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    if check:
        assert proc.returncode == 0, "%s failed (%d): %s" % (command, proc.returncode, proc.stdout[-3000:])
    return proc


def _environment():
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_CONFIG=os.path.join(PROJECT_DIR, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=BIN + os.pathsep + env.get("PATH", ""))
    return env


def converge(name):
    """The scenario's converge on this node, as an operator runs it; returns (rc, output), kept in WORK."""
    os.makedirs(WORK, exist_ok=True)
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", INVENTORY, os.path.join(SCENARIO_DIR, "converge.yml"),
                           "--limit", HOST], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=_environment(), cwd=PROJECT_DIR, timeout=2400, check=False)
    with open(os.path.join(WORK, name + ".log"), "w", encoding="utf-8") as handle:
        handle.write(proc.stdout)
    return proc.returncode, proc.stdout


def health_findings():
    """The health module's findings on the node (ad hoc, as health.yml calls it; the real nvidia-smi finds no driver)."""
    proc = subprocess.run([os.path.join(BIN, "ansible"), "-i", INVENTORY, HOST, "-m", "gpufleet.nvidia.nvidia_gpu_health",
                           "-a", "kernel_log_source=none check_nvlink=never", "-o"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=_environment(), cwd=PROJECT_DIR, timeout=300, check=False)
    found = re.search(r"\| (?:SUCCESS|FAILED!?) => (\{.*\})\s*$", proc.stdout, re.M)
    assert found, proc.stdout[-3000:]
    return json.loads(found.group(1))["findings"]


def initramfs_sum(release):
    return sh("sha256sum /boot/initrd.img-%s" % release).stdout.split()[0]


def booted(release=None):
    why = vm_boot.unavailable()
    if why:
        pytest.skip("QEMU boot not run on this machine: " + why)
    result = vm_boot.boot(HOST, release=release, workdir="/var/tmp")
    print(result)
    assert result.finished, "the boot did not reach the check unit%s:\n%s" % (
        " (timed out)" if result.timed_out else "", result.tail())
    return result


def check_driver_boot(result, release):
    report = result.report
    assert report["kernel"] == release, report
    assert report["multi-user"] == "active", (report, result.tail())
    assert report["nouveau"] == "absent", report
    # Debian's DKMS package installs nvidia-current.ko; modprobe.d aliases nvidia to it.
    assert re.search(r"/lib/modules/%s/updates/dkms/nvidia-current\.ko" % re.escape(release), report["module-file"]), report
    assert report["modprobe-rc"] != "0", report
    assert "No such device" in report["modprobe"], report
    assert not WRONG_MODULE.search(report["modprobe"]), report
    # The module was inserted and ran its init far enough to look for a GPU.
    assert [line for line in report.get("dmesg", []) if "NVRM: No NVIDIA GPU found." in line], report


def test_1_the_node_boots_its_own_kernel_and_loads_the_dkms_module_up_to_the_missing_gpu(releases):
    installed = releases[0]
    check_driver_boot(booted(), installed)


def test_2_a_new_kernel_whose_headers_the_repositories_lack_is_refused(releases):
    installed, new = releases
    before = initramfs_sum(installed)
    sh("printf 'Package: linux-headers-%s\\nPin: version *\\nPin-Priority: -1\\n' > %s" % (new, NO_HEADERS_PIN))
    sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-image-%s" % new)
    # The kernel package's own hooks ran: its initramfs has our blacklist, its DKMS hook found no headers.
    assert "etc/modprobe.d/gpufleet-blacklist-nouveau.conf" in sh("lsinitramfs /boot/initrd.img-%s" % new).stdout.split()
    assert "installed" not in sh("dkms status -k %s" % new).stdout

    rc, output = converge("2-new-kernel-without-headers")
    assert rc != 0, output[-3000:]
    assert "the node would boot %s, the default of the bootloader" % new in output, output[-3000:]
    assert "No headers are installed or in the repositories for linux-headers-%s" % new in output, output[-3000:]
    assert "No reboot is done or allowed" in output

    (finding,) = [f for f in health_findings() if f["code"] == "kernel_without_nvidia_module"]
    assert finding["severity"] == "critical" and finding["kernel"] == new, finding
    assert initramfs_sum(installed) == before


def test_3_with_the_headers_offered_the_role_installs_them_and_dkms_builds_for_the_new_kernel(releases):
    installed, new = releases
    before = initramfs_sum(installed)
    sh("rm -f %s" % NO_HEADERS_PIN)
    rc, output = converge("3-new-kernel-with-headers")
    assert rc == 0, output[-3000:]
    assert re.search(r"DKMS has the NVIDIA \S+ module for kernel\(s\) .*%s.* \(boot default %s\)"
                     % (re.escape(installed), re.escape(new)), output), output[-3000:]
    assert sh("dpkg-query -W -f '${Status}' linux-headers-%s" % new).stdout == "install ok installed"
    assert re.search(r", %s, x86_64: installed" % re.escape(new), sh("dkms status").stdout)
    assert "updates/dkms/nvidia-current.ko:" in sh("cat /lib/modules/%s/modules.dep" % new).stdout
    assert not [f for f in health_findings() if f["code"] == "kernel_without_nvidia_module"]
    # A run that changes no module configuration leaves the initramfs alone.
    assert initramfs_sum(installed) == before


def test_4_the_node_boots_the_new_kernel_by_default_with_its_dkms_module(releases):
    new = releases[1]
    check_driver_boot(booted(), new)

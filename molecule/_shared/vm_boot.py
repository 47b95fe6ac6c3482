"""Boot a converged test container as a virtual machine: its own kernel, initramfs and root filesystem.

A container shares the test machine's kernel, so nothing about the node's
kernel, initramfs or kernel modules is exercised by running it. Here the
container's filesystem is exported (docker export) into an ext4 image
(mkfs.ext4 -d: no loop device, no root privileges beyond reading the tree)
and booted under QEMU with the kernel and initramfs found in its /boot, as
the bootloader would: /vmlinuz and /initrd.img, the links Debian's kernel
packages keep on the newest kernel, unless a release is named. QEMU's TCG
emulation runs it: the test machines expose no virtualisation extensions.

What is real: the kernel, the initramfs update-initramfs built (its
modprobe.d, so the nouveau blacklist), systemd reaching multi-user.target,
the kernel module DKMS built and its load. What is not: there is no GPU, so
the NVIDIA module can only get as far as probing for one ("No such device").

Test harness only; nothing here is part of the collection.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

QEMU = "qemu-system-x86_64"
MARK = "GPUFLEET-BOOT"
# Run as the last unit of the boot; prints what the test checks to the serial
# console, then powers the machine off (QEMU then exits: -no-reboot).
CHECK_SCRIPT = r"""#!/bin/sh
exec >/dev/ttyS0 2>&1
say() { echo "%(mark)s $*"; }
say "kernel $(uname -r)"
say "multi-user $(systemctl is-active multi-user.target)"
if grep -q '^nouveau ' /proc/modules; then say "nouveau loaded"; else say "nouveau absent"; fi
# Debian names the module nvidia-current (modprobe.d installs it for "nvidia").
for name in nvidia nvidia-current; do file=$(modinfo -F filename "$name" 2>/dev/null) && break; done
say "module-file ${file:-none}"
out=$(modprobe nvidia 2>&1); rc=$?
say "modprobe-rc $rc"
say "modprobe $(echo "$out" | tr '\n' ' ')"
dmesg | grep -E 'NVRM|nvidia' | tail -n 8 | sed 's/^/%(mark)s dmesg /'
systemctl --failed --no-legend --plain | sed 's/^/%(mark)s failed-unit /'
say end
systemctl poweroff --force --force
""" % {"mark": MARK}
CHECK_UNIT = """[Unit]
Description=gpufleet test: report the boot on the serial console, then power off
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gpufleet-boot-check
"""
# Not needed to boot, and most of the tree's size: kept out of the image.
EXCLUDE = ("usr/share/doc/", "usr/share/man/", "usr/share/locale/", "var/cache/apt/", "var/lib/apt/lists/",
           "usr/src/", "var/lib/dkms/", "var/cache/gpufleet-ccache/")


def unavailable():
    """Why this machine cannot boot the images ('' when it can)."""
    if not shutil.which(QEMU):
        return "%s is not installed (make setup installs Debian's qemu-system-x86)" % QEMU
    if not shutil.which("mkfs.ext4"):
        return "mkfs.ext4 is not installed (e2fsprogs)"
    return ""


def _export(container, root):
    """The container's filesystem, unpacked under root with owners, modes and device nodes."""
    export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", root, "--numeric-owner", "-p", "--exclude=./.dockerenv",
                            "--exclude=.dockerenv"] + ["--exclude=%s" % prefix.rstrip("/") for prefix in EXCLUDE],
                           stdin=export.stdout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    export.stdout.close()
    if export.wait() != 0 or untar.returncode != 0:
        raise RuntimeError("docker export %s | tar -x failed (%s, %d): %s" % (
            container, export.returncode, untar.returncode, untar.stdout.decode("utf-8", "replace")[-2000:]))


def _prepare(root):
    """Add the check unit; give the machine the root filesystem the kernel mounts."""
    script = os.path.join(root, "usr/local/sbin/gpufleet-boot-check")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(CHECK_SCRIPT)
    os.chmod(script, 0o755)
    unit = os.path.join(root, "etc/systemd/system/gpufleet-boot-check.service")
    with open(unit, "w", encoding="utf-8") as handle:
        handle.write(CHECK_UNIT)
    wants = os.path.join(root, "etc/systemd/system/multi-user.target.wants")
    os.makedirs(wants, exist_ok=True)
    link = os.path.join(wants, "gpufleet-boot-check.service")
    if not os.path.lexists(link):
        os.symlink("/etc/systemd/system/gpufleet-boot-check.service", link)
    with open(os.path.join(root, "etc/fstab"), "w", encoding="utf-8") as handle:
        handle.write("/dev/vda / ext4 defaults 0 1\n")


def _boot_files(root, release):
    if release:
        kernel = os.path.join(root, "boot", "vmlinuz-" + release)
        initrd = [os.path.join(root, "boot", name % release) for name in ("initrd.img-%s", "initramfs-%s.img")]
    else:
        # Debian's kernel packages keep /vmlinuz and /initrd.img on the newest kernel.
        kernel = os.path.join(root, os.readlink(os.path.join(root, "vmlinuz")).lstrip("/"))
        initrd = [os.path.join(root, os.readlink(os.path.join(root, "initrd.img")).lstrip("/"))]
    initrd = [path for path in initrd if os.path.exists(path)]
    if not os.path.exists(kernel) or not initrd:
        raise RuntimeError("no kernel and initramfs for %s in the image: %s" % (release or "the default", kernel))
    return kernel, initrd[0]


def _size_mib(root):
    total = 0
    for base, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                total += os.lstat(path).st_size
    # Room for ext4's metadata and what the boot writes (journal, logs).
    return int(total * 1.25 / 2**20) + 512


def boot(container, release=None, timeout=600, workdir=None, memory_mib=2048):
    """Boot container's filesystem; returns a Boot with what the check printed and the serial log."""
    work = tempfile.mkdtemp(prefix="gpufleet-vm-", dir=workdir)
    try:
        root = os.path.join(work, "root")
        os.makedirs(root)
        started = time.monotonic()
        _export(container, root)
        _prepare(root)
        kernel, initrd = _boot_files(root, release)
        image = os.path.join(work, "disk.ext4")
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "root", "-d", root, image, "%dM" % _size_mib(root)],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        shutil.copy(kernel, os.path.join(work, "vmlinuz"))
        shutil.copy(initrd, os.path.join(work, "initrd"))
        shutil.rmtree(root)
        prepared = time.monotonic()
        argv = [QEMU, "-accel", "tcg", "-m", str(memory_mib), "-smp", "2", "-nographic", "-no-reboot",
                "-kernel", os.path.join(work, "vmlinuz"), "-initrd", os.path.join(work, "initrd"),
                "-append", "root=/dev/vda rw console=ttyS0 panic=-1",
                "-drive", "file=%s,format=raw,if=virtio" % image, "-nic", "none"]
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            serial, timed_out = proc.stdout.decode("utf-8", "replace"), False
        except subprocess.TimeoutExpired as expired:
            serial, timed_out = (expired.stdout or b"").decode("utf-8", "replace"), True
        return Boot(serial, timed_out, prepared - started, time.monotonic() - prepared)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Boot:
    """What the check unit printed (report: key -> value; lists for repeated keys) and the serial log."""

    def __init__(self, serial, timed_out, prepare_seconds, boot_seconds):
        self.serial = serial
        self.timed_out = timed_out
        self.prepare_seconds = prepare_seconds
        self.boot_seconds = boot_seconds
        self.report = {}
        for line in serial.splitlines():
            found = re.match(r"^%s (\S+) ?(.*)$" % MARK, line.strip().replace("\r", ""))
            if found:
                key, value = found.group(1), found.group(2).strip()
                if key in ("dmesg", "failed-unit"):
                    self.report.setdefault(key, []).append(value)
                else:
                    self.report[key] = value

    @property
    def finished(self):
        return "end" in self.report

    def tail(self, lines=60):
        return "\n".join(self.serial.splitlines()[-lines:])

    def __repr__(self):
        return "<Boot %s in %.0f s (+%.0f s to build the image): %r>" % (
            "timed out" if self.timed_out else "done", self.boot_seconds, self.prepare_seconds, self.report)
